// The gated GELU activation: exact tanh-form values, float32 against the float64 reference, the
// two-tensor and fused [gate | up] forms agreeing, backwards against finite differences, refused
// arguments.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <vector>

#include "gpu/ops/gated_mlp.h"
#include "support/op_harness.h"

#include "gpu/core/exec_context.h"

namespace {
// Every op of this file runs on the CPU, on the calling thread.
const tandem::gpu::exec_context ctx = tandem::gpu::exec_context::cpu();
}  // namespace

using namespace tandem::gpu;
using namespace tandem::test;

namespace {

// [gate | up] side by side, as the experts' gate_up_proj lays them out.
host_buffer fused(const host_buffer& gate, const host_buffer& up) {
  const std::int64_t n = gate.shape()[0], width = gate.shape()[1];
  host_buffer gu(gate.type(), {n, 2 * width});
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t j = 0; j < width; ++j) {
      set_value(gu, r * 2 * width + j, value_at(gate, r * width + j));
      set_value(gu, r * 2 * width + width + j, value_at(up, r * width + j));
    }
  return gu;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gated_mlp_test)

BOOST_AUTO_TEST_CASE(gelu_is_the_tanh_approximation_not_the_erf_form) {
  const auto x = host_buffer::of<double>({1, 5}, {1.0, -1.0, 2.0, 0.0, -3.0});
  host_buffer y(dtype::float64, {1, 5});
  BOOST_REQUIRE(ops::gelu_tanh_forward(ctx, x, y).is_ok());
  // 0.5·x·(1 + tanh(√(2/π)(x + 0.044715x³))); the erf form gives 0.8413447460685429 at 1.
  const std::vector<double> want = {0.8411919906082768, -0.15880800939172324, 1.954597694087775, 0.0,
                                    -0.0036373920817729943};
  expect_close(y, host_buffer::of<double>({1, 5}, want), {1e-15, 0}, "gelu_tanh");
  host_buffer y32(dtype::float32, {1, 5});
  BOOST_REQUIRE(ops::gelu_tanh_forward(ctx, converted(x, dtype::float32), y32).is_ok());
  expect_close(y32, y, tolerance_for(dtype::float32), "gelu_tanh float32");
}

BOOST_AUTO_TEST_CASE(gelu_in_float32_matches_the_float64_reference) {
  const auto x = random_buffer(dtype::float64, {7, 9}, 1, -6, 6);
  host_buffer y64(dtype::float64, {7, 9}), y32(dtype::float32, {7, 9});
  BOOST_REQUIRE(ops::gelu_tanh_forward(ctx, x, y64).is_ok());
  BOOST_REQUIRE(ops::gelu_tanh_forward(ctx, converted(x, dtype::float32), y32).is_ok());
  expect_close(y32, y64, tolerance_for(dtype::float32), "y");
}

BOOST_AUTO_TEST_CASE(gelu_backward_matches_finite_differences_and_accumulates_on_request) {
  const auto x = random_buffer(dtype::float64, {4, 6}, 2, -4, 4);
  const auto g = random_buffer(dtype::float64, {4, 6}, 3);
  host_buffer y(dtype::float64, {4, 6}), dx(dtype::float64, {4, 6});
  auto loss = [&] {
    BOOST_REQUIRE(ops::gelu_tanh_forward(ctx, x, y).is_ok());
    return weighted_sum(y, g);
  };
  BOOST_REQUIRE(ops::gelu_tanh_backward(ctx, x, g, dx).is_ok());
  check_gradient("dx", x, loss, dx);
  const auto once = converted(dx, dtype::float64);
  BOOST_REQUIRE(ops::gelu_tanh_backward(ctx, x, g, dx, true).is_ok());
  for (std::int64_t i = 0; i < once.numel(); ++i) set_value(once, i, 2 * value_at(once, i));
  expect_close(dx, once, tolerance_for(dtype::float64), "dx accumulated");
}

BOOST_AUTO_TEST_CASE(the_gate_activation_multiplies_the_up_projection) {
  const auto gate = host_buffer::of<double>({1, 2}, {1.0, -1.0});
  const auto up = host_buffer::of<double>({1, 2}, {2.0, 3.0});
  host_buffer h(dtype::float64, {1, 2});
  BOOST_REQUIRE(ops::gated_gelu_forward(ctx, gate, up, h).is_ok());
  const std::vector<double> want = {2 * 0.8411919906082768, 3 * -0.15880800939172324};
  expect_close(h, host_buffer::of<double>({1, 2}, want), {1e-15, 0}, "h");
}

BOOST_AUTO_TEST_CASE(gated_forward_in_float32_matches_the_float64_reference) {
  const auto gate = random_buffer(dtype::float64, {5, 8}, 4, -4, 4);
  const auto up = random_buffer(dtype::float64, {5, 8}, 5, -2, 2);
  host_buffer h64(dtype::float64, {5, 8}), h32(dtype::float32, {5, 8});
  BOOST_REQUIRE(ops::gated_gelu_forward(ctx, gate, up, h64).is_ok());
  BOOST_REQUIRE(ops::gated_gelu_forward(ctx, converted(gate, dtype::float32), converted(up, dtype::float32), h32).is_ok());
  expect_close(h32, h64, tolerance_for(dtype::float32), "h");
}

BOOST_AUTO_TEST_CASE(gated_backward_matches_finite_differences_for_gate_and_up) {
  const auto gate = random_buffer(dtype::float64, {4, 5}, 6, -4, 4);
  const auto up = random_buffer(dtype::float64, {4, 5}, 7, -2, 2);
  const auto g = random_buffer(dtype::float64, {4, 5}, 8);
  host_buffer h(dtype::float64, {4, 5}), dgate(dtype::float64, {4, 5}), dup(dtype::float64, {4, 5});
  auto loss = [&] {
    BOOST_REQUIRE(ops::gated_gelu_forward(ctx, gate, up, h).is_ok());
    return weighted_sum(h, g);
  };
  BOOST_REQUIRE(ops::gated_gelu_backward(ctx, gate, up, g, dgate, dup).is_ok());
  check_gradient("dgate", gate, loss, dgate);
  check_gradient("dup", up, loss, dup);
}

BOOST_AUTO_TEST_CASE(the_fused_gate_up_form_agrees_with_two_tensors_and_matches_finite_differences) {
  const auto gate = random_buffer(dtype::float64, {3, 4}, 9, -4, 4);
  const auto up = random_buffer(dtype::float64, {3, 4}, 10, -2, 2);
  const auto g = random_buffer(dtype::float64, {3, 4}, 11);
  const auto gu = fused(gate, up);
  host_buffer h(dtype::float64, {3, 4}), h_fused(dtype::float64, {3, 4});
  BOOST_REQUIRE(ops::gated_gelu_forward(ctx, gate, up, h).is_ok());
  BOOST_REQUIRE(ops::gated_gelu_fused_forward(ctx, gu, h_fused).is_ok());
  expect_close(h_fused, h, {0, 0}, "h fused");
  host_buffer dgate(dtype::float64, {3, 4}), dup(dtype::float64, {3, 4}), dgu(dtype::float64, {3, 8});
  BOOST_REQUIRE(ops::gated_gelu_backward(ctx, gate, up, g, dgate, dup).is_ok());
  BOOST_REQUIRE(ops::gated_gelu_fused_backward(ctx, gu, g, dgu).is_ok());
  expect_close(dgu, fused(dgate, dup), {0, 0}, "dgate_up");
  auto loss = [&] {
    BOOST_REQUIRE(ops::gated_gelu_fused_forward(ctx, gu, h_fused).is_ok());
    return weighted_sum(h_fused, g);
  };
  check_gradient("dgate_up", gu, loss, dgu);
  host_buffer h32(dtype::float32, {3, 4});
  BOOST_REQUIRE(ops::gated_gelu_fused_forward(ctx, converted(gu, dtype::float32), h32).is_ok());
  expect_close(h32, h, tolerance_for(dtype::float32), "h fused float32");
}

BOOST_AUTO_TEST_CASE(wrong_shapes_and_dtypes_are_refused_naming_the_tensor) {
  host_buffer gate(dtype::float32, {3, 4}), up(dtype::float32, {3, 5}), h(dtype::float32, {3, 4});
  const status s = ops::gated_gelu_forward(ctx, gate, up, h);
  BOOST_TEST((s.code() == status_code::invalid_argument));
  BOOST_TEST(s.message() == "gated_gelu_forward: up: expected [3, 4], got F32 [3, 5] cpu");
  host_buffer h64(dtype::float64, {3, 4});
  BOOST_TEST(ops::gated_gelu_forward(ctx, gate, gate, h64).message() ==
             "gated_gelu_forward: h: expected dtype float32, got F64 [3, 4] cpu");
  host_buffer odd(dtype::float32, {3, 7});
  BOOST_TEST(ops::gated_gelu_fused_forward(ctx, odd, h).message() ==
             "gated_gelu_fused_forward: gate_up: expected an even width [gate | up], got F32 [3, 7] cpu");
  host_buffer gu(dtype::float32, {3, 8}), dgu(dtype::float32, {3, 4});
  BOOST_TEST(ops::gated_gelu_fused_backward(ctx, gu, h, dgu).message() ==
             "gated_gelu_fused_backward: dgate_up: expected [3, 8], got F32 [3, 4] cpu");
  BOOST_TEST(ops::gelu_tanh_backward(ctx, gate, up, gate).message() ==
             "gelu_tanh_backward: dy: expected [3, 4], got F32 [3, 5] cpu");
}

BOOST_AUTO_TEST_SUITE_END()
