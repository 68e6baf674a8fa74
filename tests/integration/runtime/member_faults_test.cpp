// A member that dies (kill -9) or hangs (SIGSTOP) makes the controller exit non-zero with a
// message naming that member: its rank, its actors and its pid. Deadlines are generous; nothing is
// timed. The stopped member is killed by the controller, and every process of the test's group
// is killed at the end in any case.
#include <boost/test/unit_test.hpp>

#include <regex>
#include <string>

#include "process_support.hpp"

using namespace runtime_test;

BOOST_AUTO_TEST_SUITE(member_faults_test)

BOOST_AUTO_TEST_CASE(a_member_killed_with_sigkill_makes_the_controller_fail_naming_it) {
  child_process h(harness_args({"--seconds", "120"}));
  const auto pids = start_and_join(h);
  BOOST_TEST_REQUIRE(pids.size() == 4u, h.output());
  const pid_t victim = pids.at(1);
  BOOST_TEST_REQUIRE(::kill(victim, SIGKILL) == 0);
  BOOST_TEST_REQUIRE(h.exit_code() == 1, h.output());
  const std::string out = h.out();
  // The reaper (exited with signal 9) or the supervisor (no heartbeat): either names the member.
  BOOST_TEST(std::regex_search(out, std::regex("\nfailed: member 1 \\[policy-1\\] \\(pid " + std::to_string(victim) +
                                               "[ )].*(exited with signal 9 \\(SIGKILL\\)|no heartbeat)")),
             h.output());
  for (const auto& [rank, pid] : pids) BOOST_TEST(eventually([&] { return gone(pid); }), "member " << rank << " still runs");
}

BOOST_AUTO_TEST_CASE(a_stopped_member_makes_the_controller_fail_naming_it) {
  child_process h(harness_args({"--seconds", "120", "--heartbeat-interval-ms", "250", "--heartbeat-timeout-ms", "1500"}));
  const auto pids = start_and_join(h);
  BOOST_TEST_REQUIRE(pids.size() == 4u, h.output());
  const pid_t hung = pids.at(2);
  BOOST_TEST_REQUIRE(::kill(hung, SIGSTOP) == 0);
  BOOST_TEST_REQUIRE(h.exit_code() == 1, h.output());
  BOOST_TEST(std::regex_search(h.out(), std::regex("\nfailed: member 2 \\[rollout-0\\] \\(pid " + std::to_string(hung) +
                                                   " on [^)]+\\): no heartbeat for [0-9]+ ms \\(timeout 1500 ms\\)")),
             h.output());
  // The controller killed the hung member and let the others go: nothing is left running.
  for (const auto& [rank, pid] : pids) BOOST_TEST(eventually([&] { return gone(pid); }), "member " << rank << " still runs");
}

BOOST_AUTO_TEST_SUITE_END()
