// captured_work (gpu/core/captured_work.h) on cuda:0: a sequence of ops (cuBLASLt products and
// element-wise kernels) captured once as a graph and replayed over new values written into the
// same buffers gives the bits the same ops give run one by one; capturing runs nothing; a work
// that waits for the device while captured fails the capture instead of running.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <vector>

#include "support/cuda_buffers.h"
#include "support/cuda_context.h"
#include "gpu/core/captured_work.h"
#include "gpu/core/exec_context.h"
#include "gpu/core/memory.h"
#include "gpu/ops/elementwise.h"
#include "gpu/ops/linear.h"

using namespace tandem::gpu;
using tandem::test::cuda::device_buffer;

namespace {

}  // namespace

BOOST_AUTO_TEST_SUITE(cuda_captured_work)

BOOST_AUTO_TEST_CASE(a_replayed_capture_gives_the_bits_of_its_ops_run_one_by_one) {
  const exec_context ctx = tandem::test::cuda::test_context();
  for (const dtype s : {dtype::float32, dtype::bfloat16}) {
    BOOST_TEST_CONTEXT(to_string(s)) {
      device_buffer x(s, {256, 1536}), w1(s, {6144, 1536}), w2(s, {1536, 6144}), h(s, {256, 6144}), y(s, {256, 1536}),
          z(s, {256, 1536});
      w1.fill_uniform(1);
      w2.fill_uniform(2);
      const auto work = [&](const exec_context& c) -> status {
        if (auto st = ops::linear_forward(c, x.view(), w1.view(), h.view()); !st) return st;
        if (auto st = ops::linear_forward(c, h.view(), w2.view(), y.view()); !st) return st;
        return ops::add_forward(c, y.view(), x.view(), z.view());
      };
      x.fill_uniform(3);
      BOOST_REQUIRE(work(ctx).is_ok());  // once eagerly: the products' plans and the scratch exist
      BOOST_REQUIRE(wait_for_device(ctx).is_ok());
      auto captured = captured_work::capture(ctx, work);
      BOOST_REQUIRE_MESSAGE(captured.has_value(), (captured.has_value() ? "" : captured.error().message()));
      for (std::uint64_t seed : {4, 5}) {
        x.fill_uniform(seed);
        BOOST_REQUIRE(work(ctx).is_ok());
        const std::vector<unsigned char> eager = z.raw();
        z.fill_uniform(99);  // the replay must write every element again
        BOOST_REQUIRE(captured->replay(ctx).is_ok());
        BOOST_TEST((z.raw() == eager), "seed " << seed << ": the replay differs from the ops run one by one");
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(a_work_that_waits_for_the_device_fails_its_capture) {
  const exec_context ctx = tandem::test::cuda::test_context();
  bool ran_on_capture_stream = false;
  auto captured = captured_work::capture(ctx, [&](const exec_context& c) {
    ran_on_capture_stream = c.stream.native != nullptr;
    return wait_for_device(c);
  });
  BOOST_TEST(ran_on_capture_stream);
  BOOST_TEST(!captured.has_value());
}

BOOST_AUTO_TEST_SUITE_END()
