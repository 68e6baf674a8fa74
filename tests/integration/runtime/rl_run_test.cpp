// `tandem run` end to end with the fake engines: the controller, two policy and two rollout
// members (dedicated) or two members hosting both (colocated), several steps on loopback. The
// checks read what the run wrote (logger.log_dir/metrics.jsonl, generations.jsonl) and recompute
// the fake generator's tokens from the weights digest of the version each trajectory names.
#include <boost/test/unit_test.hpp>

#include <csignal>
#include <fstream>
#include <map>
#include <filesystem>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "run_checks.hpp"

using namespace runtime_test;
using json = nlohmann::json;

namespace {

/// Control bytes (both ways, heartbeats apart) of each step of a dedicated run.
std::vector<std::uint64_t> control_bytes(std::int64_t weight_mb) {
  tandem::test::temp_dir dir;
  child_process run(run_args(dedicated_recipe, dir.path(),
                             {"grpo.max_num_steps=2", "policy.refit.bucket_mb=1", "runtime.fake_weight_mb=" + std::to_string(weight_mb)}));
  BOOST_TEST_REQUIRE(run.exit_code(std::chrono::milliseconds(120000)) == 0, run.output());
  std::vector<std::uint64_t> out;
  for (const json& s : records(dir.path() / "metrics.jsonl")) {
    BOOST_TEST(s["refit"]["buckets"].get<std::int64_t>() == weight_mb, "the refit did not move the model in 1 MiB buckets");
    out.push_back(s["control_bytes"]["sent"].get<std::uint64_t>() + s["control_bytes"]["received"].get<std::uint64_t>());
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(rl_run_test)

BOOST_AUTO_TEST_CASE(a_dedicated_run_trains_every_step_on_trajectories_of_the_newest_weights_with_identical_policy_ranks) {
  check_run(dedicated_recipe, {"runtime.fake_weight_mb=4", "policy.refit.bucket_mb=1", "policy.refit.checksums=true"}, 4, 4);
}

BOOST_AUTO_TEST_CASE(a_colocated_run_trains_every_step_on_trajectories_of_the_newest_weights_with_identical_policy_ranks) {
  check_run(colocated_recipe, {"runtime.fake_weight_mb=4"}, 4, 0);
}

BOOST_AUTO_TEST_CASE(the_controllers_bytes_per_step_do_not_grow_with_the_model_while_refits_take_many_buckets) {
  const auto small = control_bytes(2);
  const auto large = control_bytes(16);
  BOOST_TEST_REQUIRE(small.size() == 2u);
  BOOST_TEST_REQUIRE(large.size() == 2u);
  for (std::size_t i = 0; i < small.size(); ++i) {
    BOOST_TEST_MESSAGE("step " << i + 1 << ": " << small[i] << " control bytes with 2 MiB of weights, " << large[i]
                               << " with 16 MiB");
    BOOST_TEST(large[i] == small[i], "step " << i + 1 << ": " << large[i] << " bytes (16 MiB model) vs " << small[i]
                                              << " (2 MiB model)");
    BOOST_TEST(large[i] < (std::uint64_t{1} << 20), "the controller moved " << large[i] << " bytes in a step");
  }
}

BOOST_AUTO_TEST_CASE(a_corrupted_weight_bucket_leaves_the_rollout_workers_on_their_old_version_and_fails_the_run_saying_why) {
  tandem::test::temp_dir dir;
  child_process run(run_args(dedicated_recipe, dir.path(),
                             {"grpo.max_num_steps=3", "runtime.fake_weight_mb=4", "policy.refit.bucket_mb=1",
                              "policy.refit.checksums=true"}),
                    {{"TANDEM_FAULT_CORRUPT_REFIT_PAYLOAD", "2"}});
  BOOST_TEST_REQUIRE(run.exit_code(std::chrono::milliseconds(120000)) == 1, run.output());
  const std::string err = run.err();
  BOOST_TEST(err.find("bucket 1 of v1: checksum mismatch") != std::string::npos, run.output());
  BOOST_TEST(err.find("v0 stays live on every rollout worker") != std::string::npos, run.output());
  for (const std::string member : {"tandem member 2", "tandem member 3"})
    BOOST_TEST(err.find(member + ": refit to v1 aborted; v0 stays live") != std::string::npos, run.output());
}

BOOST_AUTO_TEST_CASE(a_corrupted_weight_bucket_received_in_place_leaves_the_rollout_workers_without_weights_and_fails_the_run_saying_why) {
  tandem::test::temp_dir dir;
  child_process run(run_args(dedicated_recipe, dir.path(),
                             {"grpo.max_num_steps=3", "runtime.fake_weight_mb=4", "policy.refit.bucket_mb=1",
                              "policy.refit.checksums=true", "policy.refit.receive=in_place"}),
                    {{"TANDEM_FAULT_CORRUPT_REFIT_PAYLOAD", "2"}});
  BOOST_TEST_REQUIRE(run.exit_code(std::chrono::milliseconds(120000)) == 1, run.output());
  const std::string err = run.err();
  BOOST_TEST(err.find("bucket 1 of v1: checksum mismatch") != std::string::npos, run.output());
  BOOST_TEST(err.find("the rollout workers received it in place: none generates until a complete refit (v0 was the last "
                      "whole version)") != std::string::npos,
             run.output());
  BOOST_TEST(err.find("v0 stays live") == std::string::npos, run.output());
  for (const std::string member : {"tandem member 2", "tandem member 3"})
    BOOST_TEST(err.find(member + ": refit to v1 aborted; received in place: no weights are live until a complete refit (v0 "
                                 "was the last whole version)") != std::string::npos,
               run.output());
}

BOOST_AUTO_TEST_CASE(killing_a_rollout_worker_during_a_run_fails_it_naming_that_member) {
  tandem::test::temp_dir dir;
  child_process run(run_args(dedicated_recipe, dir.path(),
                             {"grpo.max_num_steps=100000", "runtime.fake_weight_mb=4", "policy.refit.bucket_mb=1"}));
  BOOST_TEST_REQUIRE(run.await_out(std::regex("step 2/")).has_value(), run.output());
  const auto pids = member_pids(run.out());
  BOOST_TEST_REQUIRE(pids.count(3) == 1u, run.output());
  BOOST_TEST_REQUIRE(::kill(pids.at(3), SIGKILL) == 0);
  BOOST_TEST_REQUIRE(run.exit_code() == 1, run.output());
  BOOST_TEST(std::regex_search(run.err(), std::regex(R"(failed: .*member 3 \[rollout-1\] \(pid [0-9]+.*(SIGKILL|heartbeat))")),
             run.output());
}

BOOST_AUTO_TEST_CASE(a_member_that_cannot_bind_its_data_plane_fails_the_run_saying_why) {
  tandem::test::temp_dir dir;
  // An address of no interface here: the members' data-plane sockets cannot bind.
  child_process run(run_args(colocated_recipe, dir.path(), {"grpo.max_num_steps=2", "runtime.fake_weight_mb=1"}),
                    {{"TANDEM_DATA_HOST", "10.255.255.1"}});
  BOOST_TEST_REQUIRE(run.exit_code(std::chrono::milliseconds(120000)) == 1, run.output());
  BOOST_TEST(run.err().find("tandem run: failed: member ") != std::string::npos, run.output());
  BOOST_TEST(run.err().find("cannot bind 'tcp://10.255.255.1:*'") != std::string::npos, run.output());
}

BOOST_AUTO_TEST_CASE(sigint_or_sigterm_to_the_controller_finishes_the_step_stops_every_member_and_exits_130_or_143) {
  for (const int signal : {SIGINT, SIGTERM}) {
    const std::string name = signal == SIGINT ? "SIGINT" : "SIGTERM";
    BOOST_TEST_CONTEXT(name) {
      tandem::test::temp_dir dir;
      child_process run(run_args(dedicated_recipe, dir.path(), {"grpo.max_num_steps=100000", "runtime.fake_weight_mb=2"}));
      BOOST_TEST_REQUIRE(run.await_out(std::regex("step 2/")).has_value(), run.output());
      const auto pids = member_pids(run.out());
      BOOST_TEST_REQUIRE(::kill(run.pid(), signal) == 0);
      BOOST_TEST(run.exit_code() == 128 + signal, run.output());
      const std::string err = run.err();
      BOOST_TEST(err.find("tandem controller: interrupted by " + name + ": finishing the step in flight") != std::string::npos,
                 run.output());
      BOOST_TEST(err.find("tandem run: interrupted by " + name + "; all 4 members left") != std::string::npos, run.output());
      BOOST_TEST(err.find("killed the members") == std::string::npos, run.output());
      for (const auto& [rank, pid] : pids) {
        BOOST_TEST(err.find("tandem member " + std::to_string(rank) + ": shut down by the controller (the run was interrupted (" +
                            name + "))") != std::string::npos,
                   run.output());
        BOOST_TEST(eventually([pid = pid] { return gone(pid); }), "member " << rank << " outlived the run");
      }
      // Every record written is whole: one per step done, each a JSON object.
      const auto steps_log = records(dir.path() / "metrics.jsonl");
      BOOST_TEST(steps_log.size() >= 2u);
      for (std::size_t i = 0; i < steps_log.size(); ++i) BOOST_TEST(steps_log[i]["step"].get<std::size_t>() == i + 1);
      // The weights of the last step done are saved before the members stop.
      BOOST_TEST(std::regex_search(run.out() + err, std::regex("steps done; stopped on request; final weights \\(v" +
                                                   std::to_string(steps_log.size()) + "\\) in ")),
                 run.output());
      BOOST_TEST(std::filesystem::is_regular_file(dir.path() / "final_weights" / "weights.bin"));
    }
  }
}

BOOST_AUTO_TEST_CASE(a_second_sigint_stops_the_members_mid_step_and_none_of_them_crashes) {
  // The members get their shutdown while a step runs: an engine call still in flight must not
  // outlive what it uses (its data-parallel group) when the member ends.
  for (int round = 0; round < 3; ++round) {
    tandem::test::temp_dir dir;
    child_process run(run_args(dedicated_recipe, dir.path(), {"grpo.max_num_steps=100000", "runtime.fake_weight_mb=2"}));
    BOOST_TEST_REQUIRE(run.await_out(std::regex("step 2/")).has_value(), run.output());
    BOOST_TEST_REQUIRE(::kill(run.pid(), SIGINT) == 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    BOOST_TEST_REQUIRE(::kill(run.pid(), SIGINT) == 0);
    BOOST_TEST(run.exit_code() == 130, run.output());
    BOOST_TEST(run.err().find("tandem run: interrupted by SIGINT; all 4 members left") != std::string::npos, run.output());
    BOOST_TEST(run.err().find("SIGSEGV") == std::string::npos, run.output());
  }
}

BOOST_AUTO_TEST_SUITE_END()
