// Final-logit softcapping: exact values, behaviour near and beyond the cap, float32 against the
// float64 reference, backward against finite differences, refused arguments.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "gpu/ops/softcap.h"
#include "support/op_harness.h"

#include "gpu/core/exec_context.h"

namespace {
// Every op of this file runs on the CPU, on the calling thread.
const tandem::gpu::exec_context ctx = tandem::gpu::exec_context::cpu();
}  // namespace

using namespace tandem::gpu;
using namespace tandem::test;

BOOST_AUTO_TEST_SUITE(softcap_test)

BOOST_AUTO_TEST_CASE(logits_become_cap_times_tanh_of_logits_over_cap) {
  const double c = 30;
  const auto x = host_buffer::of<double>({1, 4}, {0.0, c * std::atanh(0.5), 90.0, -90.0});
  host_buffer y(dtype::float64, {1, 4}), dx(dtype::float64, {1, 4});
  BOOST_REQUIRE(ops::softcap_forward(ctx, x, c, y).is_ok());
  const std::vector<double> want = {0.0, 15.0, 29.851642610601914, -29.851642610601914};
  expect_close(y, host_buffer::of<double>({1, 4}, want), {1e-15, 1e-15}, "y");
  const auto ones = host_buffer::of<double>({1, 4}, {1, 1, 1, 1});
  BOOST_REQUIRE(ops::softcap_backward(ctx, x, c, ones, dx).is_ok());
  const std::vector<double> slope = {1.0, 0.75, 0.009866037165440211, 0.009866037165440211};
  expect_close(dx, host_buffer::of<double>({1, 4}, slope), {1e-13, 1e-15}, "dx");
}

BOOST_AUTO_TEST_CASE(outputs_approach_but_never_pass_the_cap_and_slopes_vanish_without_nan) {
  const auto x = host_buffer::of<double>({2, 4}, {60, 150, 1e4, 1e30, -60, -150, -1e4, -1e30});
  const auto ones = host_buffer::of<double>({2, 4}, {1, 1, 1, 1, 1, 1, 1, 1});
  for (dtype type : {dtype::float64, dtype::float32}) {
    host_buffer y(type, {2, 4}), dx(type, {2, 4});
    BOOST_REQUIRE(ops::softcap_forward(ctx, converted(x, type), 30.0, y).is_ok());
    BOOST_REQUIRE(ops::softcap_backward(ctx, converted(x, type), 30.0, converted(ones, type), dx).is_ok());
    for (std::int64_t i = 0; i < 8; ++i) {
      BOOST_TEST(std::abs(value_at(y, i)) <= 30.0);
      BOOST_TEST(std::abs(value_at(y, i)) > 28.9);  // 30·tanh(2) = 28.92
      BOOST_TEST((value_at(y, i) > 0) == (value_at(x, i) > 0));
      BOOST_TEST(value_at(dx, i) >= 0.0);
      BOOST_TEST(value_at(dx, i) < 0.08);
    }
    BOOST_TEST(value_at(y, 2) == 30.0);  // tanh(333) rounds to 1
    BOOST_TEST(value_at(dx, 3) == 0.0);
  }
}

BOOST_AUTO_TEST_CASE(forward_and_backward_in_float32_match_the_float64_reference) {
  const auto x = random_buffer(dtype::float64, {6, 10}, 1, -100, 100);
  const auto g = random_buffer(dtype::float64, {6, 10}, 2);
  host_buffer y64(dtype::float64, {6, 10}), y32(dtype::float32, {6, 10});
  host_buffer dx64(dtype::float64, {6, 10}), dx32(dtype::float32, {6, 10});
  BOOST_REQUIRE(ops::softcap_forward(ctx, x, 30.0, y64).is_ok());
  BOOST_REQUIRE(ops::softcap_forward(ctx, converted(x, dtype::float32), 30.0, y32).is_ok());
  expect_close(y32, y64, tolerance_for(dtype::float32), "y");
  BOOST_REQUIRE(ops::softcap_backward(ctx, x, 30.0, g, dx64).is_ok());
  BOOST_REQUIRE(ops::softcap_backward(ctx, converted(x, dtype::float32), 30.0, converted(g, dtype::float32), dx32).is_ok());
  expect_close(dx32, dx64, {1e-4, 1e-6}, "dx");  // 1 − t² cancels near the cap
}

BOOST_AUTO_TEST_CASE(backward_matches_finite_differences_near_and_far_from_the_cap) {
  for (auto [lo, hi] : {std::pair{-20.0, 20.0}, std::pair{60.0, 120.0}}) {
    const auto x = random_buffer(dtype::float64, {4, 7}, 3, lo, hi);
    const auto g = random_buffer(dtype::float64, {4, 7}, 4);
    host_buffer y(dtype::float64, {4, 7}), dx(dtype::float64, {4, 7});
    auto loss = [&] {
      BOOST_REQUIRE(ops::softcap_forward(ctx, x, 30.0, y).is_ok());
      return weighted_sum(y, g);
    };
    BOOST_REQUIRE(ops::softcap_backward(ctx, x, 30.0, g, dx).is_ok());
    // A larger step near the cap: the loss is ~400 there and its slope ~1e-3, so a 1e-6 step
    // would drown the difference in rounding.
    check_gradient(lo < 0 ? "dx" : "dx near the cap", x, loss, dx, lo < 0 ? 1e-6 : 1e-4);
  }
}

BOOST_AUTO_TEST_CASE(in_place_calls_give_the_out_of_place_results) {
  const auto x = random_buffer(dtype::float32, {3, 5}, 5, -80, 80);
  const auto g = random_buffer(dtype::float32, {3, 5}, 6);
  host_buffer y(dtype::float32, {3, 5}), dx(dtype::float32, {3, 5});
  BOOST_REQUIRE(ops::softcap_backward(ctx, x, 30.0, g, dx).is_ok());
  BOOST_REQUIRE(ops::softcap_backward(ctx, x, 30.0, g, g).is_ok());
  expect_close(g, dx, {0, 0}, "dx in place");
  BOOST_REQUIRE(ops::softcap_forward(ctx, x, 30.0, y).is_ok());
  BOOST_REQUIRE(ops::softcap_forward(ctx, x, 30.0, x).is_ok());
  expect_close(x, y, {0, 0}, "y in place");
}

BOOST_AUTO_TEST_CASE(wrong_shapes_dtypes_and_caps_are_refused_naming_the_tensor) {
  host_buffer x(dtype::float32, {2, 3}), y(dtype::float32, {3, 2}), y64(dtype::float64, {2, 3});
  const status s = ops::softcap_forward(ctx, x, 30.0, y);
  BOOST_TEST((s.code() == status_code::invalid_argument));
  BOOST_TEST(s.message() == "softcap_forward: y: expected [2, 3], got F32 [3, 2] cpu");
  BOOST_TEST(ops::softcap_forward(ctx, x, 30.0, y64).message() ==
             "softcap_forward: y: expected dtype float32, got F64 [2, 3] cpu");
  BOOST_TEST(ops::softcap_forward(ctx, x, 0.0, x).message() == "softcap_forward: cap must be positive, got 0");
  BOOST_TEST(ops::softcap_backward(ctx, x, -2.5, x, x).message() == "softcap_backward: cap must be positive, got -2.5");
}

BOOST_AUTO_TEST_SUITE_END()
