// captured_work (gpu/core/captured_work.h) on the CPU: capturing runs nothing, each replay runs
// the work once more on the replaying context, a work's failure comes out of the replay, and a
// replay on another device or of nothing is refused by name.
#include <boost/test/unit_test.hpp>

#include <string>

#include "gpu/core/captured_work.h"

namespace tg = tandem::gpu;

BOOST_AUTO_TEST_SUITE(captured_work_test)

BOOST_AUTO_TEST_CASE(capturing_runs_nothing_and_each_replay_runs_the_work_once) {
  const tg::exec_context ctx = tg::exec_context::cpu();
  int runs = 0;
  auto captured = tg::captured_work::capture(ctx, [&](const tg::exec_context& c) {
    BOOST_TEST(c.dev.is_cpu());
    ++runs;
    return tg::status::ok();
  });
  BOOST_REQUIRE(captured.has_value());
  BOOST_TEST(runs == 0);
  for (int i = 1; i <= 3; ++i) {
    BOOST_REQUIRE(captured->replay(ctx).is_ok());
    BOOST_TEST(runs == i);
  }
}

BOOST_AUTO_TEST_CASE(a_failing_work_fails_its_replay_and_bad_replays_are_refused_by_name) {
  const tg::exec_context ctx = tg::exec_context::cpu();
  auto failing = tg::captured_work::capture(ctx, [](const tg::exec_context&) {
    return tg::status(tg::status_code::device_error, "linear_forward: injected");
  });
  BOOST_REQUIRE(failing.has_value());
  BOOST_TEST(failing->replay(ctx).message() == "linear_forward: injected");
  tg::exec_context elsewhere = ctx;
  elsewhere.dev = tg::device::cuda(0);
  BOOST_TEST(failing->replay(elsewhere).message() == "captured_work: captured on cpu, replayed on cuda:0");
  BOOST_TEST(tg::captured_work{}.replay(ctx).message() == "captured_work: replay of nothing captured");
}

BOOST_AUTO_TEST_SUITE_END()
