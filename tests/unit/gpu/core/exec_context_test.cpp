// The execution context: the workspace grows on demand and is reused, a call on another device
// than its tensors is refused by name, and op scratch comes from the workspace when there is one.
#include <boost/test/unit_test.hpp>

#include "gpu/core/exec_context.h"
#include "gpu/ops/scratch.h"

namespace tg = tandem::gpu;

BOOST_AUTO_TEST_SUITE(exec_context_test)

BOOST_AUTO_TEST_CASE(a_workspace_grows_to_the_largest_request_and_reuses_its_memory) {
  tg::workspace w;
  BOOST_TEST(w.capacity() == 0u);
  auto a = w.scratch("test", 1000);
  BOOST_REQUIRE(a.has_value());
  BOOST_TEST(a->size() == 1000u);
  BOOST_TEST(reinterpret_cast<std::uintptr_t>(a->data()) % 64 == 0u);
  auto b = w.scratch("test", 10);  // smaller: the same memory
  BOOST_REQUIRE(b.has_value());
  BOOST_TEST(b->data() == a->data());
  BOOST_TEST(w.capacity() == 1000u);
  BOOST_REQUIRE(w.scratch("test", 5000).has_value());
  BOOST_TEST(w.capacity() == 5000u);
  BOOST_TEST(w.high_water() == 5000u);
  w.trim();
  BOOST_TEST(w.capacity() == 0u);
  BOOST_TEST(w.high_water() == 5000u);
}

BOOST_AUTO_TEST_CASE(a_workspace_that_cannot_grow_says_who_asked_and_keeps_what_it_held) {
  tg::workspace w;
  BOOST_REQUIRE(w.scratch("test", 64).has_value());
  auto huge = w.scratch("attention_forward", std::size_t{1} << 62);
  BOOST_REQUIRE(!huge.has_value());
  BOOST_TEST((huge.error().code() == tg::status_code::out_of_memory));
  BOOST_TEST(huge.error().message().find("attention_forward: workspace of cpu: cannot grow to") == 0u,
             huge.error().message());
  BOOST_TEST(w.capacity() == 64u);
}

BOOST_AUTO_TEST_CASE(a_context_refuses_work_on_another_device_by_name) {
  const tg::exec_context cpu = tg::exec_context::cpu();
  BOOST_TEST(cpu.expect_device("linear_forward", "x", tg::device::cpu()).is_ok());
  const tg::status s = cpu.expect_device("linear_forward", "x", tg::device::cuda(1));
  BOOST_TEST((s.code() == tg::status_code::invalid_argument));
  BOOST_TEST(s.message() == "linear_forward: x is on cuda:1, but the call runs on cpu");
}

BOOST_AUTO_TEST_CASE(op_scratch_comes_from_the_workspace_when_the_context_has_one) {
  tg::workspace w;
  tg::exec_context ctx = tg::exec_context::cpu();
  auto own = tandem::gpu::ops::op_scratch::get(ctx, "test", 256);
  BOOST_REQUIRE(own.has_value());
  BOOST_TEST(own->size() == 256u);
  BOOST_TEST(w.capacity() == 0u);
  ctx.scratch = &w;
  auto shared = tandem::gpu::ops::op_scratch::get(ctx, "test", 256);
  BOOST_REQUIRE(shared.has_value());
  BOOST_TEST(w.capacity() == 256u);
  BOOST_TEST(shared->data() == w.scratch("test", 1)->data());
  tg::workspace elsewhere(tg::device::cuda(0));
  ctx.scratch = &elsewhere;
  auto refused = tandem::gpu::ops::op_scratch::get(ctx, "attention_forward", 8);
  BOOST_REQUIRE(!refused.has_value());
  BOOST_TEST(refused.error().message() == "attention_forward: the context's workspace is on cuda:0, the call runs on cpu");
}

BOOST_AUTO_TEST_SUITE_END()
