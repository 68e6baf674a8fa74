// Linear layers: float32 against the float64 reference, backward against finite differences.
#include <boost/test/unit_test.hpp>

#include "gpu/ops/linear.h"
#include "support/op_harness.h"

#include "gpu/core/exec_context.h"

namespace {
// Every op of this file runs on the CPU, on the calling thread.
const tandem::gpu::exec_context ctx = tandem::gpu::exec_context::cpu();
// A context on a GPU, for the checks that refuse what no backend runs yet.
const tandem::gpu::exec_context cuda_ctx{tandem::gpu::device::cuda(0), {}, nullptr};
}  // namespace

using namespace tandem::gpu;
using namespace tandem::test;

BOOST_AUTO_TEST_SUITE(linear_test)

BOOST_AUTO_TEST_CASE(forward_in_float32_matches_the_float64_reference) {
  const auto x = random_buffer(dtype::float64, {5, 7}, 1);
  const auto w = random_buffer(dtype::float64, {3, 7}, 2);
  host_buffer y64(dtype::float64, {5, 3}), y32(dtype::float32, {5, 3});
  BOOST_REQUIRE(ops::linear_forward(ctx, x, w, y64).is_ok());
  BOOST_REQUIRE(ops::linear_forward(ctx, converted(x, dtype::float32), converted(w, dtype::float32), y32).is_ok());
  expect_close(y32, y64, tolerance_for(dtype::float32), "y");
  // y[i][j] = sum_k x[i][k] w[j][k], spelled out once.
  double y01 = 0;
  for (int k = 0; k < 7; ++k) y01 += value_at(x, k) * value_at(w, 7 + k);
  BOOST_TEST(value_at(y64, 1) == y01, boost::test_tools::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(backward_matches_finite_differences_and_weight_gradients_accumulate) {
  const auto x = random_buffer(dtype::float64, {4, 6}, 3);
  const auto w = random_buffer(dtype::float64, {5, 6}, 4);
  const auto g = random_buffer(dtype::float64, {4, 5}, 5);
  host_buffer y(dtype::float64, {4, 5}), dx(dtype::float64, {4, 6}), dw(dtype::float64, {5, 6});
  auto loss = [&] {
    BOOST_REQUIRE(ops::linear_forward(ctx, x, w, y).is_ok());
    return weighted_sum(y, g);
  };
  BOOST_REQUIRE(ops::linear_backward(ctx, x, w, g, dx, dw).is_ok());
  check_gradient("dx", x, loss, dx);
  check_gradient("dw", w, loss, dw);
  const auto first = converted(dw, dtype::float64);
  BOOST_REQUIRE(ops::linear_backward(ctx, x, w, g, tensor{}, dw).is_ok());  // dw += again
  for (std::int64_t i = 0; i < dw.numel(); ++i) set_value(first, i, 2 * value_at(first, i));
  expect_close(dw, first, tolerance_for(dtype::float64), "dw accumulated twice");
}

BOOST_AUTO_TEST_CASE(mismatched_shapes_are_refused_naming_the_tensor) {
  host_buffer x(dtype::float32, {4, 6}), w(dtype::float32, {5, 7}), y(dtype::float32, {4, 5});
  const status s = ops::linear_forward(ctx, x, w, y);
  BOOST_TEST((s.code() == status_code::invalid_argument));
  BOOST_TEST(s.message() == "linear_forward: w: expected [*, 6], got F32 [5, 7] cpu");
}

BOOST_AUTO_TEST_CASE(float64_on_a_cuda_device_is_refused_naming_the_op) {
  host_buffer x(dtype::float64, {2, 2}), w(dtype::float64, {2, 2}), y(dtype::float64, {2, 2});
  const auto on_cuda = [](const host_buffer& b) { return tensor(b.data<double>(), dtype::float64, {2, 2}, device::cuda(0)); };
  expect_cuda_refuses_float64(ops::linear_forward(cuda_ctx, on_cuda(x), on_cuda(w), on_cuda(y)), "linear_forward");
  const status elsewhere = ops::linear_forward(ctx, on_cuda(x), on_cuda(w), on_cuda(y));
  BOOST_TEST((elsewhere.code() == status_code::invalid_argument));
  BOOST_TEST(elsewhere.message() == "linear_forward: the input is on cuda:0, but the call runs on cpu");
}

BOOST_AUTO_TEST_CASE(operands_on_different_devices_are_refused_before_any_memory_is_touched) {
  host_buffer x(dtype::float32, {2, 2}), w(dtype::float32, {2, 2}), y(dtype::float32, {2, 2});
  const tensor wc = tensor(w.data<float>(), dtype::float32, {2, 2}, device::cuda(0));
  BOOST_TEST(ops::linear_forward(ctx, x, wc, y).message() == "linear_forward: w is on cuda:0, the other operands on cpu");
  BOOST_TEST(ops::linear_backward(ctx, x, w, y, tensor{}, wc).message() == "linear_backward: dw is on cuda:0, the other operands on cpu");
}

BOOST_AUTO_TEST_SUITE_END()
