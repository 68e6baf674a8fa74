// Step checkpoints and resuming, as `tandem run` processes of the tiny Gemma 4 recipe on the CPU:
// a run of 4 steps and a run of 2 steps resumed to 4 write bitwise-identical metrics, generations
// and final weights; a resume with another recipe is refused listing the differing keys; a resume
// with one policy rank instead of two agrees within float32 reduction order; SIGTERM between
// periodic checkpoints saves one after the step in flight, from which the same command resumes as
// the uninterrupted run, byte for byte; a process killed
// (SIGKILL) at each fault-injection point, during generation, training, each rank's write and the
// commit, fails the run (naming the member), the previous checkpoint stays complete, and the same
// command then resumes and finishes as the uninterrupted run, byte for byte; retention keeps the
// newest checkpoints, and by a metric the newest and the best; a save into a full filesystem
// fails naming the path, and the previous checkpoint still resumes.
#include <boost/test/unit_test.hpp>

#include <signal.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "run_checks.hpp"

namespace fs = std::filesystem;
using namespace runtime_test;
using json = nlohmann::json;

namespace {

const std::string gemma4_recipe = std::string(TANDEM_SOURCE_DIR) + "/configs/recipes/tiny-gemma4-cpu.yaml";

/// A `tandem run` of the tiny Gemma 4 recipe into `logs`, checkpointing every 2nd step.
std::vector<std::string> gemma4_run(const fs::path& logs, int steps, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> a = {tandem_binary,
                                "run",
                                gemma4_recipe,
                                "logger.log_dir=" + logs.string(),
                                "grpo.max_num_steps=" + std::to_string(steps),
                                "grpo.val_period=2",
                                "checkpointing.enabled=true",
                                "checkpointing.save_period=2",
                                "checkpointing.keep_top_k=2"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

std::string bytes_of(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// A record without what depends on the clock or the machine: timings and traffic.
json comparable(json r) {
  for (auto it = r.begin(); it != r.end();) {
    const std::string& k = it.key();
    if (k.find("timing") != std::string::npos || k.find("bytes") != std::string::npos || k.find("seconds") != std::string::npos)
      it = r.erase(it);
    else
      ++it;
  }
  if (r.contains("events"))
    for (auto& e : r["events"])
      if (e.is_object()) e.erase("seconds");
  return r;
}

std::vector<json> comparable_records(const fs::path& file) {
  std::vector<json> out;
  for (auto& r : records(file)) out.push_back(comparable(std::move(r)));
  return out;
}

std::string run_ok(const std::vector<std::string>& args, const std::vector<std::pair<std::string, std::string>>& env = {}) {
  child_process p(args, env);
  const int code = p.exit_code(std::chrono::milliseconds(240000));
  BOOST_TEST_REQUIRE(code == 0, p.output());
  return p.out();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(checkpoint_resume_test)

BOOST_AUTO_TEST_CASE(a_run_of_4_steps_and_a_run_of_2_steps_resumed_to_4_give_bitwise_identical_metrics_generations_and_final_weights) {
  tandem::test::temp_dir dir;
  const fs::path whole = dir.path() / "whole", parts = dir.path() / "parts";
  run_ok(gemma4_run(whole, 4));
  const std::string first = run_ok(gemma4_run(parts, 2));
  BOOST_TEST(first.find("checkpoint step_2 (v2) saved in " + (parts / "checkpoints" / "step_2").string()) != std::string::npos, first);
  BOOST_TEST_REQUIRE(fs::exists(parts / "checkpoints" / "step_2" / "manifest.json"));
  const std::string second = run_ok(gemma4_run(parts, 4));
  BOOST_TEST(second.find("run directory: " + parts.string() + " (resuming from " + (parts / "checkpoints" / "step_2").string() + ")") !=
                 std::string::npos,
             second);
  BOOST_TEST(second.find("2 of 4 steps done, v2 live on every policy and rollout worker") != std::string::npos, second);

  const auto a = comparable_records(whole / "metrics.jsonl"), b = comparable_records(parts / "metrics.jsonl");
  BOOST_TEST_REQUIRE(a.size() == 4u);
  BOOST_TEST_REQUIRE(b.size() == 4u);
  for (std::size_t i = 0; i < a.size(); ++i) BOOST_TEST(a[i] == b[i], "step " << i + 1 << ":\n" << a[i].dump() << "\n" << b[i].dump());
  BOOST_TEST(bytes_of(whole / "generations.jsonl") == bytes_of(parts / "generations.jsonl"));
  BOOST_TEST_REQUIRE(fs::exists(parts / "final_weights" / "model.safetensors"));
  BOOST_TEST((bytes_of(whole / "final_weights" / "model.safetensors") == bytes_of(parts / "final_weights" / "model.safetensors")));
  BOOST_TEST((bytes_of(whole / "final_weights" / "optimizer.safetensors") == bytes_of(parts / "final_weights" / "optimizer.safetensors")));
  // Retention (keep_top_k 2, no metric): the newest two of step_2 and step_4 in both runs.
  for (const fs::path& run : {whole, parts}) {
    BOOST_TEST(fs::exists(run / "checkpoints" / "step_2" / "manifest.json"));
    BOOST_TEST(fs::exists(run / "checkpoints" / "step_4" / "weights" / "model.safetensors"));
    BOOST_TEST(fs::exists(run / "checkpoints" / "step_4" / "ranks" / "policy-1.json"));
    BOOST_TEST(fs::exists(run / "checkpoints" / "step_4" / "metrics.jsonl"));
  }
}

BOOST_AUTO_TEST_CASE(sigterm_to_a_checkpointing_run_saves_a_checkpoint_after_the_step_in_flight_and_the_same_command_resumes_as_the_uninterrupted_run) {
  // What Slurm's time-limit signal comes to (tools/launch/slurm/run.sh forwards it as SIGTERM): the
  // run is stopped between periodic checkpoints (save_period 1000), by a signal, after some step K
  // that the test reads from the records; the run's length may change on a resume, so the whole
  // run and the resumed one are both K + 2 steps long.
  tandem::test::temp_dir dir;
  const fs::path whole = dir.path() / "whole", stopped = dir.path() / "stopped";
  const std::vector<std::string> rare = {"checkpointing.save_period=1000"};
  child_process run(gemma4_run(stopped, 100000, rare));
  BOOST_TEST_REQUIRE(run.await_out(std::regex("step 1/")).has_value(), run.output());
  BOOST_TEST_REQUIRE(::kill(run.pid(), SIGTERM) == 0);
  BOOST_TEST_REQUIRE(run.exit_code(std::chrono::milliseconds(240000)) == 128 + SIGTERM, run.output());
  const std::size_t k = records(stopped / "metrics.jsonl").size();
  BOOST_TEST_REQUIRE(k >= 1u, run.output());
  const std::string step_k = "step_" + std::to_string(k);
  BOOST_TEST(run.out().find("checkpoint " + step_k + " (v" + std::to_string(k) + ") saved in " + (stopped / "checkpoints" / step_k).string()) !=
                 std::string::npos,
             run.output());
  BOOST_TEST_REQUIRE(fs::exists(stopped / "checkpoints" / step_k / "manifest.json"));

  const int total = static_cast<int>(k) + 2;
  const std::string again = run_ok(gemma4_run(stopped, total, rare));
  BOOST_TEST(again.find("(resuming from " + (stopped / "checkpoints" / step_k).string() + ")") != std::string::npos, again);
  run_ok(gemma4_run(whole, total, rare));
  const auto a = comparable_records(whole / "metrics.jsonl"), b = comparable_records(stopped / "metrics.jsonl");
  BOOST_TEST_REQUIRE(a.size() == static_cast<std::size_t>(total));
  BOOST_TEST_REQUIRE(b.size() == a.size());
  for (std::size_t i = 0; i < a.size(); ++i) BOOST_TEST(a[i] == b[i], "step " << i + 1 << ":\n" << a[i].dump() << "\n" << b[i].dump());
  BOOST_TEST(bytes_of(whole / "generations.jsonl") == bytes_of(stopped / "generations.jsonl"));
  BOOST_TEST((bytes_of(whole / "final_weights" / "model.safetensors") == bytes_of(stopped / "final_weights" / "model.safetensors")));
}

BOOST_AUTO_TEST_CASE(a_resume_with_another_recipe_is_refused_listing_the_differing_keys) {
  tandem::test::temp_dir dir;
  const fs::path logs = dir.path() / "run";
  run_ok(gemma4_run(logs, 2));
  const std::string before = bytes_of(logs / "metrics.jsonl");
  child_process changed(gemma4_run(logs, 4, {"grpo.seed=7", "policy.optimizer.lr=0.01"}));
  BOOST_TEST(changed.exit_code(std::chrono::milliseconds(60000)) == 1, changed.output());
  BOOST_TEST(changed.err().find((logs / "checkpoints" / "step_2").string() + " was made with another recipe") != std::string::npos,
             changed.output());
  BOOST_TEST(changed.err().find("grpo.seed: 42 in the checkpoint, 7 now") != std::string::npos, changed.output());
  BOOST_TEST(changed.err().find("policy.optimizer.lr: 0.05 in the checkpoint, 0.01 now") != std::string::npos, changed.output());
  BOOST_TEST(bytes_of(logs / "metrics.jsonl") == before);
}

BOOST_AUTO_TEST_CASE(a_run_resumed_with_one_policy_rank_instead_of_two_agrees_within_float32_reduction_order) {
  tandem::test::temp_dir dir;
  const fs::path whole = dir.path() / "whole", parts = dir.path() / "parts";
  run_ok(gemma4_run(whole, 4));
  run_ok(gemma4_run(parts, 2));
  run_ok(gemma4_run(parts, 4, {"cluster.gpus_per_node=1"}));
  const auto a = records(whole / "metrics.jsonl"), b = records(parts / "metrics.jsonl");
  BOOST_TEST_REQUIRE(a.size() == 4u);
  BOOST_TEST_REQUIRE(b.size() == 4u);
  for (std::size_t i = 0; i < 4; ++i)
    for (const char* key : {"train/loss", "train/reward", "train/grad_norm"}) {
      if (!a[i].contains(key)) continue;
      const double x = a[i][key].get<double>(), y = b[i][key].get<double>();
      BOOST_TEST(std::abs(x - y) <= 1e-4 * std::max(1.0, std::abs(x)), "step " << i + 1 << " " << key << ": " << x << " vs " << y);
    }
}

BOOST_AUTO_TEST_CASE(a_process_killed_at_each_fault_point_fails_the_run_and_the_same_command_resumes_and_finishes_as_the_uninterrupted_run) {
  tandem::test::temp_dir dir;
  const fs::path whole = dir.path() / "whole", logs = dir.path() / "killed";
  run_ok(gemma4_run(whole, 4));
  struct fault {
    const char* point;
    bool member;          // a member process dies (else the controller itself)
    int resumed_from;     // the checkpoint the rerun starts from
  };
  for (const fault f : {fault{"generate@4", true, 2}, fault{"train@4", true, 2}, fault{"save_weights_before@4", true, 2},
                        fault{"save_weights_after@4", true, 2}, fault{"rank_part_before@4", true, 2},
                        fault{"rank_part_during@4", true, 2}, fault{"rank_part_after@4", true, 2},
                        fault{"commit_before@4", false, 2}, fault{"commit_after@4", false, 4}}) {
    BOOST_TEST_CONTEXT(f.point) {
      fs::remove_all(logs);
      child_process killed(gemma4_run(logs, 4), {{"TANDEM_FAULT_KILL_AT", f.point}});
      BOOST_TEST(killed.exit_code(std::chrono::milliseconds(240000)) != 0, killed.output());
      const std::string said = killed.out() + killed.err();
      BOOST_TEST(said.find("fault injection: killed at") != std::string::npos, killed.output());
      if (f.member) BOOST_TEST(said.find("exited with signal 9 (SIGKILL)") != std::string::npos, killed.output());
      // The checkpoint before the fault is complete; a half-written one is not.
      BOOST_TEST_REQUIRE(fs::exists(logs / "checkpoints" / "step_2" / "manifest.json"));
      BOOST_TEST(fs::exists(logs / "checkpoints" / "step_4" / "manifest.json") == (f.resumed_from == 4));
      const std::string resumed = "step_" + std::to_string(f.resumed_from);
      const std::string again = run_ok(gemma4_run(logs, 4));
      BOOST_TEST(again.find("(resuming from " + (logs / "checkpoints" / resumed).string() + ")") != std::string::npos, again);
      BOOST_TEST((bytes_of(whole / "final_weights" / "model.safetensors") == bytes_of(logs / "final_weights" / "model.safetensors")));
      const auto a = comparable_records(whole / "metrics.jsonl"), b = comparable_records(logs / "metrics.jsonl");
      BOOST_TEST((a == b));
      BOOST_TEST(bytes_of(whole / "generations.jsonl") == bytes_of(logs / "generations.jsonl"));
    }
  }
}

BOOST_AUTO_TEST_CASE(retention_by_a_metric_keeps_the_newest_checkpoint_and_the_best_by_validation_accuracy) {
  tandem::test::temp_dir dir;
  const fs::path logs = dir.path() / "run";
  run_ok(gemma4_run(logs, 6, {"checkpointing.save_period=1", "grpo.val_period=1", "checkpointing.keep_top_k=1",
                              "checkpointing.metric_name=val:accuracy"}));
  // The best step by validation/accuracy (ties to the newer) and the newest, from the run's own records.
  const auto recs = records(logs / "metrics.jsonl");
  BOOST_TEST_REQUIRE(recs.size() == 6u);
  std::int64_t best = 0;
  double best_value = -1;
  for (const auto& r : recs) {
    const double v = r.at("validation/accuracy").get<double>();
    if (v >= best_value) {
      best_value = v;
      best = r.at("step").get<std::int64_t>();
    }
  }
  std::vector<std::string> expected = {"step_" + std::to_string(best)};
  if (best != 6) expected.push_back("step_6");
  std::vector<std::string> kept;
  for (const auto& e : fs::directory_iterator(logs / "checkpoints")) kept.push_back(e.path().filename().string());
  std::sort(kept.begin(), kept.end());
  std::sort(expected.begin(), expected.end());
  BOOST_TEST(kept == expected, boost::test_tools::per_element());
  const auto manifest = json::parse(bytes_of(logs / "checkpoints" / expected.front() / "manifest.json"));
  BOOST_TEST(manifest.at("metric_name").get<std::string>() == "val:accuracy");
  BOOST_TEST(manifest.at("metric").is_number());
}

/// A small tmpfs needs a mount namespace (unshare -rm: an unprivileged user namespace); where the
/// machine allows none, the case is skipped, saying so.
boost::test_tools::assertion_result can_mount_tmpfs(boost::unit_test::test_unit_id) {
  child_process probe({"unshare", "-rm", "sh", "-c", "d=$(mktemp -d) && mount -t tmpfs -o size=1m tmpfs \"$d\"; r=$?; rmdir \"$d\" 2>/dev/null; exit $r"});
  boost::test_tools::assertion_result r(probe.exit_code(std::chrono::milliseconds(20000)) == 0);
  r.message() << "skipped: this machine mounts no tmpfs in a user namespace (" << probe.err() << ")";
  return r;
}

BOOST_AUTO_TEST_CASE(a_save_into_a_full_filesystem_fails_naming_the_path_and_the_previous_checkpoint_still_resumes,
                     *boost::unit_test::precondition(can_mount_tmpfs)) {
  tandem::test::temp_dir dir;
  const fs::path logs = dir.path() / "run", full = dir.path() / "full";
  fs::create_directories(full);
  // 4 MiB: step_2 (about 2.8 MB) fits, step_4 beside it does not; then the filesystem grows.
  std::string command = "mount -t tmpfs -o size=4m tmpfs " + full.string() + " || exit 90; ";
  std::string args;
  for (const auto& a : gemma4_run(logs, 4, {"checkpointing.checkpoint_dir=" + full.string()})) args += "'" + a + "' ";
  command += args + "> " + (dir.path() / "first.txt").string() + " 2>&1; echo $? > " + (dir.path() / "first.rc").string() + "; ";
  command += "ls " + full.string() + " > " + (dir.path() / "after.txt").string() + "; ";
  command += "mount -o remount,size=16m " + full.string() + " && " + args;
  child_process both({"unshare", "-rm", "sh", "-c", command});
  const int code = both.exit_code(std::chrono::milliseconds(240000));
  const std::string first = bytes_of(dir.path() / "first.txt");
  BOOST_TEST(bytes_of(dir.path() / "first.rc") == "1\n", first);
  BOOST_TEST(first.find("tandem run: failed: checkpoint after step 4: policy-0: save of v4 into " + (full / "step_4.partial" / "weights").string()) !=
                 std::string::npos,
             first);
  BOOST_TEST(first.find("No space left on device (the previous checkpoint is intact)") != std::string::npos, first);
  BOOST_TEST(bytes_of(dir.path() / "after.txt") == "step_2\nstep_4.partial\n");
  BOOST_TEST_REQUIRE(code == 0, both.output());
  BOOST_TEST(both.out().find("(resuming from " + (full / "step_2").string() + ")") != std::string::npos, both.output());
  BOOST_TEST(both.out().find("checkpoint not used: " + (full / "step_4.partial").string() + ": an unfinished save") != std::string::npos,
             both.output());
  BOOST_TEST(both.out().find("checkpoint step_4 (v4) saved in " + (full / "step_4").string()) != std::string::npos, both.output());
}

BOOST_AUTO_TEST_SUITE_END()
