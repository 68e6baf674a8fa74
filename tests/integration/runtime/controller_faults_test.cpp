// Members do not outlive their controller: killed (kill -9), it takes its local members down at
// once through their parent-death signal; stopped (SIGSTOP, a hang), it stops sending heartbeats
// and every member exits on its own after the heartbeat timeout.
#include <boost/test/unit_test.hpp>

#include <regex>
#include <string>

#include "process_support.hpp"

using namespace runtime_test;

BOOST_AUTO_TEST_SUITE(controller_faults_test)

BOOST_AUTO_TEST_CASE(killing_the_controller_makes_every_member_exit) {
  // The default heartbeat timeout (10 s) is left as it is: the members go because their parent died.
  child_process h(harness_args({"--seconds", "120"}));
  const auto pids = start_and_join(h);
  BOOST_TEST_REQUIRE(pids.size() == 4u, h.output());
  BOOST_TEST_REQUIRE(::kill(h.pid(), SIGKILL) == 0);
  BOOST_TEST_REQUIRE(h.wait_exit().has_value());
  for (const auto& [rank, pid] : pids) {
    // Orphans come to this (subreaper) process: each must end, by the SIGTERM of PR_SET_PDEATHSIG.
    BOOST_TEST_REQUIRE(eventually([&] { return reaped_here(pid); }), "member " << rank << " (pid " << pid
                                                                               << ") still runs or was not reaped here\n"
                                                                               << h.output());
    const int status = reaped_statuses().at(pid);
    BOOST_TEST((WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM), "member " << rank << " ended with wait status " << status);
  }
}

BOOST_AUTO_TEST_CASE(a_stopped_controller_makes_every_member_exit_after_the_heartbeat_timeout) {
  child_process h(harness_args({"--seconds", "120", "--heartbeat-interval-ms", "250", "--heartbeat-timeout-ms", "1500"}));
  const auto pids = start_and_join(h);
  BOOST_TEST_REQUIRE(pids.size() == 4u, h.output());
  BOOST_TEST_REQUIRE(::kill(h.pid(), SIGSTOP) == 0);
  for (const auto& [rank, pid] : pids)
    BOOST_TEST(eventually([&] { return gone(pid); }), "member " << rank << " (pid " << pid << ") still runs\n" << h.output());
  const std::string err = h.err();
  for (const auto& [rank, pid] : pids)
    BOOST_TEST(std::regex_search(
                   err, std::regex("tandem member " + std::to_string(rank) +
                                   ": the controller at tcp://[0-9.:]+ sent no heartbeat for [0-9]+ ms \\(timeout 1500 ms\\)")),
               h.output());
  // ~child_process continues and kills the stopped controller.
}

BOOST_AUTO_TEST_SUITE_END()
