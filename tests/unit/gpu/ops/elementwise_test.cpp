// Element-wise arithmetic of the residual stream: exact sums and scales, in place, the
// layer_scalar backward against finite differences, refused arguments.
#include <boost/test/unit_test.hpp>

#include "gpu/ops/elementwise.h"
#include "support/op_harness.h"

#include "gpu/core/exec_context.h"

namespace {
// Every op of this file runs on the CPU, on the calling thread.
const tandem::gpu::exec_context ctx = tandem::gpu::exec_context::cpu();
}  // namespace

using namespace tandem::gpu;
using namespace tandem::test;

BOOST_AUTO_TEST_SUITE(elementwise_test)

BOOST_AUTO_TEST_CASE(sums_and_scales_are_exact_and_may_be_computed_in_place) {
  const auto a = host_buffer::of<float>({2, 2}, {1.5f, -2, 0.25f, 8});
  const auto b = host_buffer::of<float>({2, 2}, {0.5f, 2, -0.25f, 1});
  host_buffer y(dtype::float32, {2, 2});
  BOOST_REQUIRE(ops::add_forward(ctx, a, b, y).is_ok());
  BOOST_TEST(y.to_vector<float>() == (std::vector<float>{2, 0, 0, 9}));
  BOOST_REQUIRE(ops::add_forward(ctx, a, b, a).is_ok());
  BOOST_TEST(a.to_vector<float>() == (std::vector<float>{2, 0, 0, 9}));
  BOOST_REQUIRE(ops::scale_forward(ctx, a, 0.5, a).is_ok());
  BOOST_TEST(a.to_vector<float>() == (std::vector<float>{1, 0, 0, 4.5f}));
  const auto s = host_buffer::of<float>({1}, {-2});
  BOOST_REQUIRE(ops::scale_by_forward(ctx, a, s, y).is_ok());
  BOOST_TEST(y.to_vector<float>() == (std::vector<float>{-2, 0, 0, -9}));
}

BOOST_AUTO_TEST_CASE(the_layer_scalar_backward_matches_finite_differences) {
  const auto x = random_buffer(dtype::float64, {3, 5}, 1);
  const auto s = host_buffer::of<double>({1}, {0.7});
  const auto g = random_buffer(dtype::float64, {3, 5}, 2);
  host_buffer y(dtype::float64, {3, 5}), dx(dtype::float64, {3, 5}), ds(dtype::float64, {1});
  auto loss = [&] {
    BOOST_REQUIRE(ops::scale_by_forward(ctx, x, s, y).is_ok());
    return weighted_sum(y, g);
  };
  BOOST_REQUIRE(ops::scale_by_backward(ctx, x, s, g, dx, ds).is_ok());
  check_gradient("dx", x, loss, dx);
  check_gradient("ds", s, loss, ds);
  // ds accumulates.
  BOOST_REQUIRE(ops::scale_by_backward(ctx, x, s, g, {}, ds).is_ok());
  BOOST_TEST(value_at(ds, 0) == 2 * weighted_sum(x, g), boost::test_tools::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(mismatched_shapes_and_dtypes_are_refused_naming_the_op_and_tensor) {
  const host_buffer a(dtype::float32, {2, 3}), b(dtype::float32, {3, 2}), d(dtype::float64, {2, 3});
  const auto bad = ops::add_forward(ctx, a, b, a);
  BOOST_TEST(bad.message().find("add_forward: b") == 0, bad.message());
  BOOST_TEST(ops::add_forward(ctx, a, d, a).message().find("add_forward: b") == 0);
  BOOST_TEST(ops::scale_by_forward(ctx, a, host_buffer(dtype::float32, {2}), a).message().find("scale_by_forward: s") == 0);
}

BOOST_AUTO_TEST_SUITE_END()
