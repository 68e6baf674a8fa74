// RMSNorm: hand-computed rows with and without weight, float32 against the float64 reference,
// per-head views, backward (dx, dw) against finite differences, accumulation, refused arguments
// (of the residual norm too; its values and bits are backend_ops' cases).
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>

#include "gpu/ops/rmsnorm.h"
#include "support/op_harness.h"

#include "gpu/core/exec_context.h"

namespace {
// Every op of this file runs on the CPU, on the calling thread.
const tandem::gpu::exec_context ctx = tandem::gpu::exec_context::cpu();
}  // namespace

using namespace tandem::gpu;
using namespace tandem::test;

namespace {

constexpr double eps = 1e-6;

// A copy of b with every element multiplied by k.
host_buffer scaled(const host_buffer& b, double k) {
  auto out = converted(b, b.type());
  for (std::int64_t i = 0; i < out.numel(); ++i) set_value(out, i, k * value_at(b, i));
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(rmsnorm_test)

BOOST_AUTO_TEST_CASE(a_row_is_divided_by_its_root_mean_square_and_multiplied_by_the_weight_directly) {
  const auto x = host_buffer::of<double>({2, 2}, {3, 4, -1, 0});
  const auto w = host_buffer::of<double>({2}, {2, 0.5});
  host_buffer y(dtype::float64, {2, 2}), inv(dtype::float64, {2}), y_plain(dtype::float64, {2, 2});
  BOOST_REQUIRE(ops::rmsnorm_forward(ctx, x, w, eps, y, inv).is_ok());
  const double r0 = std::pow(12.5 + eps, -0.5), r1 = std::pow(0.5 + eps, -0.5);
  BOOST_TEST(value_at(inv, 0) == r0);
  BOOST_TEST(value_at(inv, 1) == r1);
  BOOST_TEST(value_at(y, 0) == 3 * r0 * 2);  // weight 2 used as is, not 1 + 2
  BOOST_TEST(value_at(y, 1) == 4 * r0 * 0.5);
  BOOST_TEST(value_at(y, 2) == -1 * r1 * 2);
  BOOST_TEST(value_at(y, 3) == 0.0);
  BOOST_REQUIRE(ops::rmsnorm_forward(ctx, x, tensor{}, eps, y_plain).is_ok());  // scale-less, no inv_rms
  BOOST_TEST(value_at(y_plain, 0) == 3 * r0);
  BOOST_TEST(value_at(y_plain, 1) == 4 * r0);
  BOOST_TEST(value_at(y_plain, 2) == -r1);
}

BOOST_AUTO_TEST_CASE(forward_in_float32_matches_the_float64_reference_with_and_without_weight) {
  const auto x = random_buffer(dtype::float64, {6, 40}, 1, -3, 3);
  const auto w = random_buffer(dtype::float64, {40}, 2, 0.5, 1.5);
  for (bool with_weight : {true, false}) {
    host_buffer y64(dtype::float64, {6, 40}), y32(dtype::float32, {6, 40});
    host_buffer inv64(dtype::float64, {6}), inv32(dtype::float32, {6});
    const auto w32 = converted(w, dtype::float32);
    BOOST_REQUIRE(ops::rmsnorm_forward(ctx, x, with_weight ? tensor(w) : tensor{}, eps, y64, inv64).is_ok());
    BOOST_REQUIRE(
        ops::rmsnorm_forward(ctx, converted(x, dtype::float32), with_weight ? tensor(w32) : tensor{}, eps, y32, inv32)
            .is_ok());
    expect_close(y32, y64, tolerance_for(dtype::float32), with_weight ? "y" : "y scale-less");
    expect_close(inv32, inv64, tolerance_for(dtype::float32), "inv_rms");
  }
}

BOOST_AUTO_TEST_CASE(in_place_forward_gives_the_out_of_place_result) {
  const auto x = random_buffer(dtype::float32, {3, 16}, 3);
  const auto w = random_buffer(dtype::float32, {16}, 4);
  host_buffer y(dtype::float32, {3, 16});
  BOOST_REQUIRE(ops::rmsnorm_forward(ctx, x, w, eps, y).is_ok());
  BOOST_REQUIRE(ops::rmsnorm_forward(ctx, x, w, eps, x).is_ok());
  expect_close(x, y, {0, 0}, "in place");
}

BOOST_AUTO_TEST_CASE(a_per_head_view_normalizes_every_head_on_its_own) {
  const std::int64_t tokens = 2, heads = 3, d = 8;
  const auto x = random_buffer(dtype::float64, {tokens, heads, d}, 5);
  const auto w = random_buffer(dtype::float64, {d}, 6, 0.5, 1.5);
  host_buffer y(dtype::float64, {tokens, heads, d}), one(dtype::float64, {1, d});
  const tensor rows = x.view().reshaped({tokens * heads, d});
  BOOST_REQUIRE(ops::rmsnorm_forward(ctx, rows, w, eps, y.view().reshaped({tokens * heads, d})).is_ok());
  for (std::int64_t r = 0; r < tokens * heads; ++r) {
    BOOST_REQUIRE(ops::rmsnorm_forward(ctx, rows.rows(r, r + 1), w, eps, one).is_ok());
    for (std::int64_t j = 0; j < d; ++j) BOOST_TEST(value_at(y, r * d + j) == value_at(one, j));
  }
}

BOOST_AUTO_TEST_CASE(backward_with_weight_matches_finite_differences_for_x_and_w) {
  const auto x = random_buffer(dtype::float64, {5, 8}, 7);
  const auto w = random_buffer(dtype::float64, {8}, 8, 0.5, 1.5);
  const auto g = random_buffer(dtype::float64, {5, 8}, 9);
  host_buffer y(dtype::float64, {5, 8}), inv(dtype::float64, {5});
  host_buffer dx(dtype::float64, {5, 8}), dw(dtype::float64, {8});
  auto loss = [&] {
    BOOST_REQUIRE(ops::rmsnorm_forward(ctx, x, w, eps, y, inv).is_ok());
    return weighted_sum(y, g);
  };
  loss();
  BOOST_REQUIRE(ops::rmsnorm_backward(ctx, x, w, inv, g, dx, dw).is_ok());
  check_gradient("dx", x, loss, dx);
  check_gradient("dw", w, loss, dw);
}

BOOST_AUTO_TEST_CASE(backward_without_weight_matches_finite_differences) {
  const auto x = random_buffer(dtype::float64, {4, 6}, 10, -2, 2);
  const auto g = random_buffer(dtype::float64, {4, 6}, 11);
  host_buffer y(dtype::float64, {4, 6}), inv(dtype::float64, {4}), dx(dtype::float64, {4, 6});
  auto loss = [&] {
    BOOST_REQUIRE(ops::rmsnorm_forward(ctx, x, tensor{}, eps, y, inv).is_ok());
    return weighted_sum(y, g);
  };
  loss();
  BOOST_REQUIRE(ops::rmsnorm_backward(ctx, x, tensor{}, inv, g, dx, tensor{}).is_ok());
  check_gradient("dx", x, loss, dx);
}

BOOST_AUTO_TEST_CASE(weight_gradients_accumulate_and_dx_accumulates_on_request) {
  const auto x = random_buffer(dtype::float64, {3, 70}, 12);  // more columns than one dw block
  const auto w = random_buffer(dtype::float64, {70}, 13);
  const auto g = random_buffer(dtype::float64, {3, 70}, 14);
  host_buffer y(dtype::float64, {3, 70}), inv(dtype::float64, {3});
  host_buffer dx(dtype::float64, {3, 70}), dw(dtype::float64, {70});
  BOOST_REQUIRE(ops::rmsnorm_forward(ctx, x, w, eps, y, inv).is_ok());
  BOOST_REQUIRE(ops::rmsnorm_backward(ctx, x, w, inv, g, dx, dw).is_ok());
  const auto dx1 = converted(dx, dtype::float64), dw1 = converted(dw, dtype::float64);
  BOOST_REQUIRE(ops::rmsnorm_backward(ctx, x, w, inv, g, dx, dw, true).is_ok());
  expect_close(dx, scaled(dx1, 2), tolerance_for(dtype::float64), "dx accumulated");
  expect_close(dw, scaled(dw1, 2), tolerance_for(dtype::float64), "dw accumulated");
  BOOST_REQUIRE(ops::rmsnorm_backward(ctx, x, w, inv, g, dx, tensor{}).is_ok());  // written again
  expect_close(dx, dx1, {0, 0}, "dx written");
}

BOOST_AUTO_TEST_CASE(backward_in_float32_matches_the_float64_reference) {
  const auto x = random_buffer(dtype::float64, {6, 33}, 15);
  const auto w = random_buffer(dtype::float64, {33}, 16, 0.5, 1.5);
  const auto g = random_buffer(dtype::float64, {6, 33}, 17);
  host_buffer y64(dtype::float64, {6, 33}), inv64(dtype::float64, {6});
  host_buffer dx64(dtype::float64, {6, 33}), dw64(dtype::float64, {33});
  BOOST_REQUIRE(ops::rmsnorm_forward(ctx, x, w, eps, y64, inv64).is_ok());
  BOOST_REQUIRE(ops::rmsnorm_backward(ctx, x, w, inv64, g, dx64, dw64).is_ok());
  const auto x32 = converted(x, dtype::float32), w32 = converted(w, dtype::float32);
  host_buffer y32(dtype::float32, {6, 33}), inv32(dtype::float32, {6});
  host_buffer dx32(dtype::float32, {6, 33}), dw32(dtype::float32, {33});
  BOOST_REQUIRE(ops::rmsnorm_forward(ctx, x32, w32, eps, y32, inv32).is_ok());
  BOOST_REQUIRE(ops::rmsnorm_backward(ctx, x32, w32, inv32, converted(g, dtype::float32), dx32, dw32).is_ok());
  expect_close(dx32, dx64, {1e-4, 1e-5}, "dx");
  expect_close(dw32, dw64, {1e-4, 1e-5}, "dw");
}

BOOST_AUTO_TEST_CASE(wrong_shapes_and_dtypes_are_refused_naming_the_tensor) {
  host_buffer x(dtype::float32, {4, 6}), y(dtype::float32, {4, 6}), inv(dtype::float32, {4});
  host_buffer w5(dtype::float32, {5}), w6(dtype::float32, {6}), inv64(dtype::float64, {4});
  status s = ops::rmsnorm_forward(ctx, x, w5, eps, y, inv);
  BOOST_TEST((s.code() == status_code::invalid_argument));
  BOOST_TEST(s.message() == "rmsnorm_forward: w: expected [6], got F32 [5] cpu");
  BOOST_TEST(ops::rmsnorm_forward(ctx, x, w6, eps, y, inv64).message() ==
             "rmsnorm_forward: inv_rms: expected dtype float32, got F64 [4] cpu");
  BOOST_TEST(ops::rmsnorm_forward(ctx, x, w6, -1, y).message() == "rmsnorm_forward: eps must not be negative, got -1");
  host_buffer dx(dtype::float32, {4, 6}), dw(dtype::float32, {6}), short_inv(dtype::float32, {3});
  BOOST_TEST(ops::rmsnorm_backward(ctx, x, tensor{}, inv, y, dx, dw).message() ==
             "rmsnorm_backward: dw: given for a scale-less norm (w is empty)");
  BOOST_TEST(ops::rmsnorm_backward(ctx, x, w6, short_inv, y, dx, dw).message() ==
             "rmsnorm_backward: inv_rms: expected [4], got F32 [3] cpu");
}

BOOST_AUTO_TEST_CASE(the_residual_norm_refuses_missing_partners_shared_outputs_and_wrong_shapes_naming_the_tensor) {
  host_buffer x(dtype::float32, {4, 6}), res(dtype::float32, {4, 6}), out(dtype::float32, {4, 6}), w(dtype::float32, {6});
  host_buffer pre(dtype::float32, {4, 6}), scale(dtype::float32, {1}), next(dtype::float32, {4, 6}), w5(dtype::float32, {5});
  const auto message = [&](auto&& edit) {
    ops::residual_norm_io io;
    io.x = x;
    io.w = w;
    io.residual = res;
    io.out = out;
    edit(io);
    const status s = ops::residual_norm_forward(ctx, io, eps);
    BOOST_TEST((s.code() == status_code::invalid_argument));
    return s.message();
  };
  BOOST_TEST(message([&](ops::residual_norm_io& io) { io.scale = scale; }) ==
             "residual_norm_forward: pre_scale is given exactly when scale is (the backward needs the sum before the scale)");
  BOOST_TEST(message([&](ops::residual_norm_io& io) { io.next = next; }) ==
             "residual_norm_forward: next is given exactly when next_w is");
  BOOST_TEST(message([&](ops::residual_norm_io& io) { io.w = w5; }) ==
             "residual_norm_forward: w: expected [6], got F32 [5] cpu");
  BOOST_TEST(message([&](ops::residual_norm_io& io) { io.out = x; }) ==
             "residual_norm_forward: out shares memory with x (only out may be residual)");
  BOOST_TEST(message([&](ops::residual_norm_io& io) {
               io.next_w = w;
               io.next = out;
             }) == "residual_norm_forward: next shares memory with out");
  BOOST_TEST(message([&](ops::residual_norm_io& io) { io.residual = tensor{}; }) == "residual_norm_forward: residual is required");
}

BOOST_AUTO_TEST_SUITE_END()
