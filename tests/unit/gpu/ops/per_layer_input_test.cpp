// PLE mixing: the (c + t)·2^(−1/2) combination and the gelu_tanh(a) ⊙ ple_l layer gate, by hand,
// float32 against the float64 reference, backwards against finite differences, the untouched
// slices of other layers, refused arguments.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include "gpu/ops/per_layer_input.h"
#include "support/op_harness.h"

#include "gpu/core/exec_context.h"

namespace {
// Every op of this file runs on the CPU, on the calling thread.
const tandem::gpu::exec_context ctx = tandem::gpu::exec_context::cpu();
}  // namespace

using namespace tandem::gpu;
using namespace tandem::test;

BOOST_AUTO_TEST_SUITE(per_layer_input_test)

BOOST_AUTO_TEST_CASE(the_context_and_token_parts_are_summed_then_scaled_by_one_over_root_two) {
  const auto c = host_buffer::of<double>({1, 3}, {1, 2, 0.5});
  const auto t = host_buffer::of<double>({1, 3}, {3, -2, 0.25});
  host_buffer ple(dtype::float64, {1, 3});
  BOOST_REQUIRE(ops::ple_combine_forward(ctx, c, t, ple).is_ok());
  const std::vector<double> want = {4 / std::sqrt(2.0), 0, 0.75 / std::sqrt(2.0)};
  expect_close(ple, host_buffer::of<double>({1, 3}, want), {1e-15, 0}, "ple");
  const auto dple = host_buffer::of<double>({1, 3}, {std::sqrt(2.0), 1, -2});
  host_buffer dc(dtype::float64, {1, 3}), dt(dtype::float64, {1, 3});
  BOOST_REQUIRE(ops::ple_combine_backward(ctx, dple, dc, dt).is_ok());
  const std::vector<double> grad = {1, 1 / std::sqrt(2.0), -std::sqrt(2.0)};
  expect_close(dc, host_buffer::of<double>({1, 3}, grad), {1e-15, 0}, "dc");
  expect_close(dt, host_buffer::of<double>({1, 3}, grad), {1e-15, 0}, "dt");
}

BOOST_AUTO_TEST_CASE(combination_in_float32_matches_the_float64_reference_and_finite_differences) {
  const auto c = random_buffer(dtype::float64, {4, 12}, 1, -3, 3);
  const auto t = random_buffer(dtype::float64, {4, 12}, 2, -30, 30);
  const auto g = random_buffer(dtype::float64, {4, 12}, 3);
  host_buffer ple64(dtype::float64, {4, 12}), ple32(dtype::float32, {4, 12});
  BOOST_REQUIRE(ops::ple_combine_forward(ctx, c, t, ple64).is_ok());
  BOOST_REQUIRE(ops::ple_combine_forward(ctx, converted(c, dtype::float32), converted(t, dtype::float32), ple32).is_ok());
  expect_close(ple32, ple64, tolerance_for(dtype::float32), "ple");
  host_buffer dc(dtype::float64, {4, 12}), dt(dtype::float64, {4, 12});
  auto loss = [&] {
    BOOST_REQUIRE(ops::ple_combine_forward(ctx, c, t, ple64).is_ok());
    return weighted_sum(ple64, g);
  };
  BOOST_REQUIRE(ops::ple_combine_backward(ctx, g, dc, dt).is_ok());
  check_gradient("dc", c, loss, dc);
  check_gradient("dt", t, loss, dt);
  host_buffer only_t(dtype::float64, {4, 12});
  BOOST_REQUIRE(ops::ple_combine_backward(ctx, g, tensor{}, only_t).is_ok());  // dc skipped
  expect_close(only_t, dt, {0, 0}, "dt alone");
}

BOOST_AUTO_TEST_CASE(the_gate_multiplies_gelu_of_a_by_the_slice_of_its_layer) {
  // ple [1, 2, 2]: layer 0 = {5, 6}, layer 1 = {2, -4}.
  const auto ple = host_buffer::of<double>({1, 2, 2}, {5, 6, 2, -4});
  const auto a = host_buffer::of<double>({1, 2}, {1.0, -1.0});
  host_buffer g(dtype::float64, {1, 2});
  BOOST_REQUIRE(ops::ple_gate_forward(ctx, a, ple, 1, g).is_ok());
  const std::vector<double> want = {2 * 0.8411919906082768, -4 * -0.15880800939172324};
  expect_close(g, host_buffer::of<double>({1, 2}, want), {1e-15, 0}, "g");
  // d ple_l = gelu_tanh(a) · dg, only in layer 1's slice.
  const auto dg = host_buffer::of<double>({1, 2}, {1, 1});
  host_buffer da(dtype::float64, {1, 2});
  const auto d_ple = host_buffer::of<double>({1, 2, 2}, {7, 7, 7, 7});
  BOOST_REQUIRE(ops::ple_gate_backward(ctx, a, ple, 1, dg, da, d_ple).is_ok());
  const std::vector<double> want_d_ple = {7, 7, 0.8411919906082768, -0.15880800939172324};
  expect_close(d_ple, host_buffer::of<double>({1, 2, 2}, want_d_ple), {1e-15, 0}, "d_ple");
}

BOOST_AUTO_TEST_CASE(gate_in_float32_matches_the_float64_reference) {
  const auto a = random_buffer(dtype::float64, {5, 6}, 4, -4, 4);
  const auto ple = random_buffer(dtype::float64, {5, 3, 6}, 5, -2, 2);
  const auto dg = random_buffer(dtype::float64, {5, 6}, 6);
  host_buffer g64(dtype::float64, {5, 6}), g32(dtype::float32, {5, 6});
  host_buffer da64(dtype::float64, {5, 6}), da32(dtype::float32, {5, 6});
  host_buffer dp64(dtype::float64, {5, 3, 6}), dp32(dtype::float32, {5, 3, 6});
  const auto a32 = converted(a, dtype::float32), ple32 = converted(ple, dtype::float32);
  BOOST_REQUIRE(ops::ple_gate_forward(ctx, a, ple, 2, g64).is_ok());
  BOOST_REQUIRE(ops::ple_gate_forward(ctx, a32, ple32, 2, g32).is_ok());
  expect_close(g32, g64, tolerance_for(dtype::float32), "g");
  BOOST_REQUIRE(ops::ple_gate_backward(ctx, a, ple, 2, dg, da64, dp64).is_ok());
  BOOST_REQUIRE(ops::ple_gate_backward(ctx, a32, ple32, 2, converted(dg, dtype::float32), da32, dp32).is_ok());
  expect_close(da32, da64, tolerance_for(dtype::float32), "da");
  expect_close(dp32, dp64, tolerance_for(dtype::float32), "d_ple");
}

BOOST_AUTO_TEST_CASE(gate_backward_matches_finite_differences_for_a_and_every_layer_of_ple) {
  const auto a = random_buffer(dtype::float64, {4, 5}, 7, -4, 4);
  const auto ple = random_buffer(dtype::float64, {4, 3, 5}, 8, -2, 2);
  const auto dg = random_buffer(dtype::float64, {4, 5}, 9);
  for (std::int64_t layer = 0; layer < 3; ++layer) {
    host_buffer g(dtype::float64, {4, 5}), da(dtype::float64, {4, 5}), d_ple(dtype::float64, {4, 3, 5});
    auto loss = [&] {
      BOOST_REQUIRE(ops::ple_gate_forward(ctx, a, ple, layer, g).is_ok());
      return weighted_sum(g, dg);
    };
    BOOST_REQUIRE(ops::ple_gate_backward(ctx, a, ple, layer, dg, da, d_ple).is_ok());
    check_gradient("da", a, loss, da);
    check_gradient("d_ple", ple, loss, d_ple);  // zero outside the layer's slice, as it must be
  }
}

BOOST_AUTO_TEST_CASE(wrong_shapes_layers_and_dtypes_are_refused_naming_the_tensor) {
  host_buffer a(dtype::float32, {3, 4}), ple(dtype::float32, {3, 2, 4}), g(dtype::float32, {3, 4});
  status s = ops::ple_gate_forward(ctx, a, ple, 2, g);
  BOOST_TEST((s.code() == status_code::invalid_argument));
  BOOST_TEST(s.message() == "ple_gate_forward: layer 2 is outside [0, 2) (ple F32 [3, 2, 4] cpu)");
  host_buffer wide(dtype::float32, {3, 2, 5});
  BOOST_TEST(ops::ple_gate_forward(ctx, a, wide, 0, g).message() ==
             "ple_gate_forward: ple: expected [3, *, 4], got F32 [3, 2, 5] cpu");
  host_buffer d_ple64(dtype::float64, {3, 2, 4});
  BOOST_TEST(ops::ple_gate_backward(ctx, a, ple, 0, g, a, d_ple64).message() ==
             "ple_gate_backward: d_ple: expected dtype float32, got F64 [3, 2, 4] cpu");
  host_buffer t(dtype::float32, {3, 5});
  BOOST_TEST(ops::ple_combine_forward(ctx, a, t, g).message() ==
             "ple_combine_forward: t: expected [3, 4], got F32 [3, 5] cpu");
  BOOST_TEST(ops::ple_combine_backward(ctx, a, t, tensor{}).message() ==
             "ple_combine_backward: dc: expected [3, 4], got F32 [3, 5] cpu");
}

BOOST_AUTO_TEST_SUITE_END()
