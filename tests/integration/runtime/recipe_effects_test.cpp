// Recipe keys whose effect only a whole run shows (the schema walk names these tests): the stop
// tokens end responses, jsonl_enabled: false writes no records, a request that outlives
// runtime.request_timeout_s fails the run naming the request, and the GRPO/DAPO reward keys
// (scaling, overlong shaping and filtering, leave-one-out, normalisation, clips) change what a run
// trains on exactly as their formulas say, with TensorBoard recording every step.
#include <boost/test/unit_test.hpp>

#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "run_checks.hpp"

using namespace runtime_test;
using json = nlohmann::json;

BOOST_AUTO_TEST_SUITE(recipe_effects_test)

BOOST_AUTO_TEST_CASE(stop_token_ids_end_every_response_at_its_first_stop_token) {
  tandem::test::temp_dir dir;
  const std::set<std::int32_t> stops = {10, 20, 30, 40, 50};
  child_process run(run_args(colocated_recipe, dir.path(),
                             {"grpo.max_num_steps=2", "runtime.fake_weight_mb=1",
                              "policy.generation.stop_token_ids=[10, 20, 30, 40, 50]"}));
  BOOST_TEST_REQUIRE(run.exit_code(std::chrono::milliseconds(120000)) == 0, run.output());
  const auto config = resolved(colocated_recipe, {});
  std::size_t stopped_early = 0, all = 0;
  for (const json& t : records(dir.path() / "generations.jsonl")) {
    const auto tokens = t["tokens"].get<std::vector<std::int32_t>>();
    BOOST_TEST_REQUIRE(!tokens.empty());
    for (std::size_t i = 0; i + 1 < tokens.size(); ++i)
      BOOST_TEST(stops.count(tokens[i]) == 0u, "trajectory " << t["id"] << " ran past stop token " << tokens[i]);
    if (stops.count(tokens.back()) == 1u) {
      ++stopped_early;
      BOOST_TEST(tokens.size() <= static_cast<std::size_t>(config.policy.generation.max_new_tokens));
    } else {
      BOOST_TEST(tokens.size() == static_cast<std::size_t>(config.policy.generation.max_new_tokens));
    }
    ++all;
  }
  BOOST_TEST(all == 2u * 16u);
  BOOST_TEST(stopped_early > 0u, "no response met any of five stop tokens in 32 tokens of a 64-token vocabulary");
}

BOOST_AUTO_TEST_CASE(with_jsonl_disabled_a_run_writes_no_metrics_or_generations) {
  tandem::test::temp_dir dir;
  child_process run(run_args(colocated_recipe, dir.path(),
                             {"grpo.max_num_steps=2", "runtime.fake_weight_mb=1", "logger.jsonl_enabled=false"}));
  BOOST_TEST_REQUIRE(run.exit_code(std::chrono::milliseconds(120000)) == 0, run.output());
  BOOST_TEST(run.out().find("step 2/2") != std::string::npos, run.output());
  BOOST_TEST(!std::filesystem::exists(dir.path() / "metrics.jsonl"));
  BOOST_TEST(!std::filesystem::exists(dir.path() / "generations.jsonl"));
}

BOOST_AUTO_TEST_CASE(a_request_past_request_timeout_s_fails_the_run_naming_the_request) {
  tandem::test::temp_dir dir;
  // Heartbeats would notice a stopped member only after a minute: the request deadline fires first.
  child_process run(run_args(dedicated_recipe, dir.path(),
                             {"grpo.max_num_steps=100000", "runtime.fake_weight_mb=1", "runtime.request_timeout_s=1",
                              "runtime.heartbeat_timeout_ms=60000"}));
  BOOST_TEST_REQUIRE(run.await_out(std::regex("step 1/")).has_value(), run.output());
  const auto pids = member_pids(run.out());
  BOOST_TEST_REQUIRE(pids.count(3) == 1u, run.output());
  BOOST_TEST_REQUIRE(::kill(pids.at(3), SIGSTOP) == 0);
  const auto code = run.wait_exit(std::chrono::milliseconds(30000));
  ::kill(pids.at(3), SIGCONT);
  BOOST_TEST_REQUIRE(code.has_value(), "the run did not fail within 30 s of a 1 s request deadline\n" << run.output());
  BOOST_TEST((WIFEXITED(*code) && WEXITSTATUS(*code) == 1), run.output());
  BOOST_TEST(std::regex_search(run.err(), std::regex("failed: .*(timeout|timed out)")), run.output());
}

BOOST_AUTO_TEST_CASE(reward_keys_shape_clip_and_filter_what_a_run_trains_on_and_tensorboard_records_every_step) {
  tandem::test::temp_dir dir;
  // Responses of at most 16 tokens: shaping penalises those past 12 (a buffer of 4), the stop
  // tokens end some early, overlong filtering drops the rest from the loss.
  child_process run(run_args(colocated_recipe, dir.path(),
                             {"grpo.max_num_steps=2", "runtime.fake_weight_mb=1", "policy.generation.max_new_tokens=16",
                              "policy.generation.stop_token_ids=[10, 20, 30, 40, 50]", "grpo.reward_scaling.enabled=true",
                              "grpo.reward_scaling.target_min=-1", "grpo.reward_scaling.target_max=1",
                              "grpo.reward_shaping.enabled=true", "grpo.reward_shaping.max_response_length=16",
                              "grpo.reward_shaping.overlong_buffer_length=4", "grpo.reward_shaping.overlong_buffer_penalty=1",
                              "grpo.overlong_filtering=true", "grpo.use_leave_one_out_baseline=true",
                              "grpo.normalize_rewards=true", "grpo.advantage_clip_low=-1", "grpo.advantage_clip_high=1",
                              "logger.tensorboard_enabled=true"}));
  BOOST_TEST_REQUIRE(run.exit_code(std::chrono::milliseconds(120000)) == 0, run.output());
  std::map<std::int64_t, std::vector<json>> by_step;
  for (const json& t : records(dir.path() / "generations.jsonl")) by_step[t["step"].get<std::int64_t>()].push_back(t);
  BOOST_TEST_REQUIRE(by_step.size() == 2u);
  const auto metrics = records(dir.path() / "metrics.jsonl");
  BOOST_TEST_REQUIRE(metrics.size() == 2u);
  std::size_t truncated_all = 0, clipped = 0;
  for (const auto& [step, ts] : by_step) {
    std::map<std::int64_t, std::vector<const json*>> groups;
    std::int64_t truncated = 0, kept_tokens = 0;
    double total = 0;
    for (const json& t : ts) {
      const double raw = t["raw_reward"].get<double>();
      const auto length = static_cast<double>(t["tokens"].size());
      // Scaled {0, 1} -> {-1, 1}, then shaped: expected length 12, penalty (length - 12) / 4.
      const double want = 2 * raw - 1 + std::min(-(length - 12) / 4, 0.0);
      BOOST_TEST(t["reward"].get<double>() == want, boost::test_tools::tolerance(1e-12));
      total += want;
      if (t["finish"] == "length") ++truncated;
      else kept_tokens += static_cast<std::int64_t>(length);
      groups[t["prompt_index"].get<std::int64_t>()].push_back(&t);
    }
    for (const auto& [prompt, members] : groups)
      for (const json* t : members) {
        // Leave-one-out over the rest of its group: the baseline of their rewards, the std of their
        // unshaped (scaled) rewards; normalised when that std is not 0, then clamped to [-1, 1].
        double sum = 0, unshaped_sum = 0;
        std::vector<double> others;
        for (const json* o : members)
          if (o != t) {
            sum += (*o)["reward"].get<double>();
            others.push_back(2 * (*o)["raw_reward"].get<double>() - 1);
            unshaped_sum += others.back();
          }
        const double n = static_cast<double>(others.size()), mean = unshaped_sum / n;
        double sq = 0;
        for (const double x : others) sq += (x - mean) * (x - mean);
        const double sd = n > 1 ? std::sqrt(sq / (n - 1)) : 0.0;
        double a = (*t)["reward"].get<double>() - sum / n;
        if (sd > 0) a /= sd + 1e-6;
        const double want = std::clamp(a, -1.0, 1.0);
        clipped += want != a ? 1 : 0;
        BOOST_TEST((*t)["advantage"].get<double>() == want, boost::test_tools::tolerance(1e-9));
      }
    const json& m = metrics[static_cast<std::size_t>(step - 1)];
    BOOST_TEST(m["train/overlong_filtered_samples"].get<std::int64_t>() == truncated);
    BOOST_TEST(m["train/num_tokens"].get<std::int64_t>() == kept_tokens);
    BOOST_TEST(m["train/reward"].get<double>() == total / static_cast<double>(ts.size()), boost::test_tools::tolerance(1e-12));
    truncated_all += static_cast<std::size_t>(truncated);
  }
  BOOST_TEST(truncated_all > 0u, "no response ran to max_new_tokens: overlong filtering was not exercised");
  BOOST_TEST(truncated_all < 32u, "every response ran to max_new_tokens: nothing was trained on");
  BOOST_TEST(clipped > 0u, "no advantage reached the clips");
  std::vector<std::filesystem::path> events;
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    if (e.path().filename().string().starts_with("events.out.tfevents.")) events.push_back(e.path());
  BOOST_TEST_REQUIRE(events.size() == 1u, "one TensorBoard events file per run");
  BOOST_TEST(std::filesystem::file_size(events.front()) > 200u);
}

BOOST_AUTO_TEST_SUITE_END()
