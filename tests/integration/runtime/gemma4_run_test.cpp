// `tandem run` end to end with the Gemma 4 CPU engines (runtime.engine gemma4, the shipped
// tiny-gemma4-cpu recipes over the all-features test checkpoint): the controller and two colocated
// members, or two policy and two rollout members. The checks read what the run wrote
// (logger.log_dir/metrics.jsonl, generations.jsonl, recipe.yaml), rebuild the engines a member
// built from the run's recipe, and recompute the first step's generations from the checkpoint.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <initializer_list>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/runtime/engine_factory.hpp"
#include "actors/runtime/recipe_settings.hpp"
#include "gpu/engine/parity_task.h"
#include "orchestration/config/resolve.h"
#include "run_checks.hpp"

using namespace runtime_test;
using json = nlohmann::json;

namespace {

const std::string colocated_gemma4 = std::string(TANDEM_SOURCE_DIR) + "/configs/recipes/tiny-gemma4-cpu.yaml";
const std::string dedicated_gemma4 = std::string(TANDEM_SOURCE_DIR) + "/configs/recipes/tiny-gemma4-cpu-dedicated.yaml";
const std::string checkpoint = std::string(TANDEM_SOURCE_DIR) + "/tests/data/reference/all_features";

/// The refusal of a failed result, or "" when it holds a value (Boost.Test may evaluate a message
/// before the condition it goes with).
template <class T>
std::string refusal(const tandem::gpu::result<T>& r) {
  return r ? std::string() : r.error().message();
}

/// What a finished run left in its directory.
struct finished_run {
  std::vector<json> metrics, generations;
  tandem::config::recipe_config recipe;  ///< recipe.yaml: the recipe as the members received it
  std::string output;
  std::uint64_t final_digest = 0;  ///< of RUN_DIR/final_weights, loaded as a policy rank loads a checkpoint
};

/// Runs `recipe` (with `overrides`) for `steps` steps into a fresh directory; requires exit 0.
finished_run run_recipe(const std::string& recipe, std::size_t steps, const std::vector<std::string>& overrides = {}) {
  tandem::test::temp_dir dir;
  std::vector<std::string> args = {tandem_binary, "run", recipe, "logger.log_dir=" + dir.path().string(),
                                   "grpo.max_num_steps=" + std::to_string(steps)};
  args.insert(args.end(), overrides.begin(), overrides.end());
  child_process run(args);
  const int code = run.exit_code(std::chrono::milliseconds(100000));
  finished_run out;
  out.output = run.out() + run.err();
  BOOST_TEST_REQUIRE(code == 0, run.output());
  out.metrics = records(dir.path() / "metrics.jsonl");
  out.generations = records(dir.path() / "generations.jsonl");
  auto r = tandem::config::resolve_resolved_text(read_text(dir.path() / "recipe.yaml"), "recipe.yaml");
  BOOST_TEST_REQUIRE(r.errors.empty(), tandem::config::to_string(r.errors));
  out.recipe = r.recipe->config;
  // The weights the run ended with, saved by policy rank 0 as a checkpoint directory.
  auto saved = out.recipe;
  saved.policy.model_name = (dir.path() / "final_weights").string();
  auto engines = tandem::make_engines(saved, true, false, nullptr);
  BOOST_TEST_REQUIRE(bool(engines), refusal(engines));
  out.final_digest = engines->weights_digest();
  return out;
}

/// `record` without the fields that name a process, a time or a byte count, or describe the refit
/// (a colocated run bumps a version, a dedicated one streams buckets) or a colocated member's
/// device turns (performance/, memory/): what two runs of one recipe and seed must agree on
/// whatever their placement.
json placement_free(json record) {
  for (const char* key : {"rollout_worker", "refit"}) record.erase(key);
  for (auto it = record.begin(); it != record.end();) {
    const std::string& key = it.key();
    bool timing = key.starts_with("performance/") || key.starts_with("memory/");
    for (const char* part : {"timing", "time", "second", "per_sec", "bytes"}) timing = timing || key.find(part) != std::string::npos;
    it = timing ? record.erase(it) : std::next(it);
  }
  return record;
}

/// A step's metric recorded under the first of `names` the record holds.
double metric(const json& step, std::initializer_list<const char*> names) {
  for (const char* name : names)
    if (const auto it = step.find(name); it != step.end()) return it->get<double>();
  BOOST_FAIL("no metric " << *names.begin() << " in " << step.dump());
  return 0;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gemma4_run_test)

BOOST_AUTO_TEST_CASE(a_colocated_gemma4_run_trains_every_step_with_identical_policy_ranks_and_generates_with_the_newest_weights) {
  constexpr std::size_t steps = 3;
  const finished_run run = run_recipe(colocated_gemma4, steps);
  const auto& config = run.recipe;
  // The members opened the checkpoint the controller resolved (relative to the recipe's folder).
  BOOST_TEST(config.policy.model_name == std::filesystem::path(checkpoint).lexically_normal().string());
  BOOST_TEST((config.runtime.engine == tandem::config::engine_kind::gemma4));

  // Version 0: the checkpoint's weights, as a policy rank loads them.
  auto engines = tandem::make_engines(config, true, false, nullptr);
  BOOST_TEST_REQUIRE(bool(engines), refusal(engines));
  std::uint64_t previous = engines->weights_digest();

  BOOST_TEST_REQUIRE(run.metrics.size() == steps, run.output);
  for (std::size_t n = 0; n < steps; ++n) {
    const json& s = run.metrics[n];
    BOOST_TEST_CONTEXT("step " << n + 1) {
      BOOST_TEST(s["step"].get<std::size_t>() == n + 1);
      BOOST_TEST(s["generated_with"].get<std::uint64_t>() == n, "generated with stale weights");
      BOOST_TEST(s["trained_to"].get<std::uint64_t>() == n + 1);
      BOOST_TEST(s["refit"]["mode"].get<std::string>() == "colocated");
      BOOST_TEST(metric(s, {"train/num_tokens", "train_tokens"}) > 0);
      BOOST_TEST(std::isfinite(metric(s, {"train/loss", "loss"})), s.dump());
      // The trainer scores each sampled token with the generator's logprob, bit for bit.
      BOOST_TEST(metric(s, {"train/gen_kl_error", "gen_kl_error"}) == 0.0, s.dump());
      BOOST_TEST(metric(s, {"train/probs_ratio", "probs_ratio"}) == 1.0, s.dump());
      const auto& digests = s["weights_digests"];
      BOOST_TEST_REQUIRE(digests.size() == 2u);
      BOOST_TEST(digest(digests[0]) == digest(digests[1]), "the data-parallel ranks differ");
      BOOST_TEST(digest(digests[0]) != previous, "the step left the weights unchanged");
      previous = digest(digests[0]);
    }
  }
  // The run ends by saving its last weights and saying where they are.
  BOOST_TEST(run.final_digest == previous, "the final weights are not the last step's");
  BOOST_TEST(run.output.find("final weights (v" + std::to_string(steps) + ") in ") != std::string::npos, run.output);
  BOOST_TEST(run.output.find("/final_weights") != std::string::npos, run.output);

  // Every trajectory: a parity prompt over the checkpoint's vocabulary, the newest version, the
  // parity reward of its last token, a stop only at the model's eos id.
  const auto prompts = tandem::gpu::parity_prompts(static_cast<std::uint64_t>(config.grpo.seed), 64, 256, 3);
  const std::set<std::vector<std::int32_t>> prompt_set(prompts.begin(), prompts.end());
  const std::size_t per_step = static_cast<std::size_t>(config.grpo.num_prompts_per_step * config.grpo.num_generations_per_prompt);
  BOOST_TEST_REQUIRE(run.generations.size() == steps * per_step);
  for (const json& t : run.generations) {
    BOOST_TEST_CONTEXT("trajectory " << t["id"] << " of step " << t["step"]) {
      BOOST_TEST(t["version"].get<std::uint64_t>() == t["step"].get<std::uint64_t>() - 1, "not the newest weights");
      BOOST_TEST(prompt_set.count(t["prompt"].get<std::vector<std::int32_t>>()) == 1u);
      const auto tokens = t["tokens"].get<std::vector<std::int32_t>>();
      BOOST_TEST_REQUIRE(!tokens.empty());
      for (const std::int32_t token : tokens) BOOST_TEST((token >= 0 && token < 256));
      BOOST_TEST(t["reward"].get<double>() == tandem::gpu::parity_reward(tokens));
      BOOST_TEST((t["finish"].get<std::string>() == "stop") == (tokens.back() == 1));
      if (tokens.back() != 1) BOOST_TEST(tokens.size() == static_cast<std::size_t>(config.policy.generation.max_new_tokens));
    }
  }

  // Step 1 again, outside the run: a generator over the checkpoint, each request at the coordinates
  // the run recorded, gives the same tokens (generations are keyed by seed, step, prompt, sample,
  // whatever member ran them and whatever shared its batch).
  const std::vector<std::string> differing = regenerated_differently(config, run.generations, 1);
  BOOST_TEST(differing.empty(), differing.size() << " trajectories of step 1 were not generated by the checkpoint's weights: "
                                                 << (differing.empty() ? "" : differing.front()));
}

BOOST_AUTO_TEST_CASE(colocated_and_dedicated_gemma4_runs_of_one_recipe_and_seed_give_bitwise_identical_generations_and_metrics) {
  constexpr std::size_t steps = 3;
  const finished_run colocated = run_recipe(colocated_gemma4, steps);
  const finished_run dedicated = run_recipe(dedicated_gemma4, steps);
  BOOST_TEST(colocated.recipe.policy.generation.colocated);
  BOOST_TEST(dedicated.recipe.policy.generation.colocated == false);
  BOOST_TEST_REQUIRE(colocated.generations.size() == dedicated.generations.size());
  BOOST_TEST_REQUIRE(colocated.metrics.size() == steps);
  BOOST_TEST_REQUIRE(dedicated.metrics.size() == steps);
  for (std::size_t n = 0; n < steps; ++n) {
    BOOST_TEST(dedicated.metrics[n]["refit"]["mode"].get<std::string>() == "dedicated");
    BOOST_TEST(dedicated.metrics[n]["refit"]["buckets"].get<std::int64_t>() > 0);  // the weights moved as bytes
    BOOST_TEST(placement_free(colocated.metrics[n]).dump() == placement_free(dedicated.metrics[n]).dump(),
               "step " << n + 1 << "'s metrics differ:\n  colocated " << colocated.metrics[n].dump() << "\n  dedicated "
                       << dedicated.metrics[n].dump());
  }
  std::set<std::string> rollout_workers[2];  // colocated, dedicated
  for (std::size_t i = 0; i < colocated.generations.size(); ++i) {
    BOOST_TEST(placement_free(colocated.generations[i]).dump() == placement_free(dedicated.generations[i]).dump(),
               "trajectory " << i << " differs:\n  colocated " << colocated.generations[i].dump() << "\n  dedicated "
                             << dedicated.generations[i].dump());
    rollout_workers[0].insert(colocated.generations[i]["rollout_worker"].get<std::string>());
    rollout_workers[1].insert(dedicated.generations[i]["rollout_worker"].get<std::string>());
  }
  // Both runs spread each step over two rollout workers: equal records are no single-worker accident.
  BOOST_TEST(rollout_workers[0].size() == 2u);
  BOOST_TEST(rollout_workers[1].size() == 2u);
}

BOOST_AUTO_TEST_CASE(an_external_environment_that_scores_parity_gives_the_parity_runs_metrics_bit_for_bit) {
  // tools/external_reward_example.py scores the parity task in Python, one process per scoring
  // worker, over JSON lines: the run must be the built-in parity run, reward for reward.
  constexpr std::size_t steps = 3;
  const finished_run parity = run_recipe(colocated_gemma4, steps);
  const finished_run external = run_recipe(
      colocated_gemma4, steps,
      {"env.name=external", "env.external.command=python3 " + std::string(TANDEM_SOURCE_DIR) + "/tools/external_reward_example.py"});
  BOOST_TEST((external.recipe.env.name == tandem::config::environment_kind::external));
  BOOST_TEST_REQUIRE(parity.metrics.size() == steps);
  BOOST_TEST_REQUIRE(external.metrics.size() == steps);
  for (std::size_t n = 0; n < steps; ++n)
    BOOST_TEST(placement_free(parity.metrics[n]).dump() == placement_free(external.metrics[n]).dump(),
               "step " << n + 1 << "'s metrics differ:\n  parity   " << parity.metrics[n].dump() << "\n  external "
                       << external.metrics[n].dump());
  BOOST_TEST_REQUIRE(parity.generations.size() == external.generations.size());
  for (std::size_t i = 0; i < parity.generations.size(); ++i)
    BOOST_TEST(placement_free(parity.generations[i]).dump() == placement_free(external.generations[i]).dump());
}

BOOST_AUTO_TEST_CASE(an_external_environment_that_answers_garbage_fails_the_run_naming_the_trajectory_and_its_prompt) {
  tandem::test::temp_dir dir;
  child_process run({tandem_binary, "run", colocated_gemma4, "logger.log_dir=" + dir.path().string(), "grpo.max_num_steps=2",
                     "env.name=external", "env.external.command=while read line; do echo not-json; done"});
  const int code = run.exit_code(std::chrono::milliseconds(100000));
  BOOST_TEST(code != 0, run.output());
  const std::string said = run.out() + run.err();
  // Two scoring workers: whichever trajectory is scored first fails the step, named with its prompt.
  const std::string named = "external environment `while read line; do echo not-json; done`: trajectory ";
  const auto at = said.find("the run failed: step 1: driver: step 0: scoring: environment worker ");
  BOOST_TEST_REQUIRE(at != std::string::npos, said);
  const std::string line = said.substr(at, said.find('\n', at) - at);
  BOOST_TEST(line.find(named) != std::string::npos, line);
  BOOST_TEST(line.find(", sample ") != std::string::npos, line);
  BOOST_TEST(line.find("(prompt ") != std::string::npos, line);
  BOOST_TEST(line.ends_with("the answer is not a JSON object; it answered: not-json"), line);
}

BOOST_AUTO_TEST_CASE(offloading_the_optimizer_state_while_generating_changes_no_bit_of_a_colocated_run_and_records_the_turns) {
  constexpr std::size_t steps = 3;
  const finished_run resident = run_recipe(colocated_gemma4, steps);
  const finished_run offloaded = run_recipe(colocated_gemma4, steps, {"policy.offload_optimizer_for_generation=true"});
  BOOST_TEST_REQUIRE(offloaded.metrics.size() == steps);
  BOOST_TEST_REQUIRE(resident.metrics.size() == steps);
  BOOST_TEST(offloaded.final_digest == resident.final_digest);
  for (std::size_t n = 0; n < steps; ++n) {
    BOOST_TEST_CONTEXT("step " << n + 1) {
      BOOST_TEST(placement_free(offloaded.metrics[n]).dump() == placement_free(resident.metrics[n]).dump());
      // Each of the two members moved its AdamW moments to host memory for the generation turn
      // and back for training; the KV cache the other way. The first generation turn's offload
      // came as the member started: logged then, in no step's figures.
      const json& s = offloaded.metrics[n];
      if (n == 0) {
        BOOST_TEST(s["memory/optimizer_offloaded_gib"].get<double>() == 0.0, s.dump());
        BOOST_TEST(!s.contains("performance/offload_optimizer_gb_per_s"), s.dump());
      } else {
        BOOST_TEST(s["memory/optimizer_offloaded_gib"].get<double>() > 0, s.dump());
        BOOST_TEST(s["performance/offload_optimizer_gb_per_s"].get<double>() > 0, s.dump());
      }
      BOOST_TEST(s["timing/train/restore_optimizer"].get<double>() > 0, s.dump());
      BOOST_TEST(s["performance/restore_optimizer_gb_per_s"].get<double>() > 0, s.dump());
      BOOST_TEST(!s.contains("memory/training_in_use_gib"), "the CPU's device memory is the host's: not measured");
      BOOST_TEST(s["timing/train/release_kv_cache"].get<double>() > 0, s.dump());
      BOOST_TEST(s["performance/host_link_gb_per_s"].get<double>() > 0, s.dump());
      // Without offloading only the cache changes hands.
      BOOST_TEST(resident.metrics[n]["memory/optimizer_offloaded_gib"].get<double>() == 0.0);
      BOOST_TEST(resident.metrics[n]["timing/train/release_kv_cache"].get<double>() > 0);
    }
  }
  // Both members' state, as a policy rank built from the recipe holds it.
  auto engines = tandem::make_engines(offloaded.recipe, true, false, nullptr);
  BOOST_TEST_REQUIRE(bool(engines), refusal(engines));
  const double both_gib = 2.0 * static_cast<double>(engines->train->offloaded_state_bytes()) / (1024.0 * 1024.0 * 1024.0);
  BOOST_TEST(both_gib > 0);
  BOOST_TEST(offloaded.metrics[1]["memory/optimizer_offloaded_gib"].get<double>() == both_gib);
  BOOST_TEST(offloaded.output.find("moved to pinned host memory for the first generation turn") != std::string::npos,
             offloaded.output);
}

BOOST_AUTO_TEST_CASE(an_op_failure_injected_into_training_fails_the_run_naming_the_phase_and_the_op) {
  tandem::test::temp_dir dir;
  child_process run({tandem_binary, "run", colocated_gemma4, "logger.log_dir=" + dir.path().string(), "grpo.max_num_steps=2"},
                    {{"TANDEM_FAULT_OP", "linear_backward@3"}});
  const int code = run.exit_code(std::chrono::milliseconds(100000));
  BOOST_TEST(code == 1, run.output());
  const std::string said = run.out() + run.err();
  const auto at = said.find("the run failed: step 1: driver: step 0: train on policy rank ");
  BOOST_TEST_REQUIRE(at != std::string::npos, said);
  const std::string line = said.substr(at, said.find('\n', at) - at);
  BOOST_TEST(line.find("linear_backward: injected failure (call 3)") != std::string::npos, line);
}

BOOST_AUTO_TEST_CASE(a_gemma4_run_with_two_optimizer_steps_per_step_and_the_kl_term_clips_its_later_steps_and_pays_kl_to_the_reference) {
  // 16 rollouts per step in global batches of 8: two optimizer steps, the second against lp_prev
  // of the weights before the first, so its PPO ratio leaves 1. Clips tight enough to fire at a
  // toy model's ratios: clip-higher / low at 1 -+ 0.01, the dual clip at 1.02.
  constexpr std::size_t steps = 3;
  const finished_run run = run_recipe(colocated_gemma4, steps,
                                      {"policy.train_global_batch_size=8", "loss_fn.reference_policy_kl_penalty=0.05",
                                       "loss_fn.ratio_clip_min=0.01", "loss_fn.ratio_clip_max=0.01",
                                       "loss_fn.ratio_clip_c=1.02"});
  BOOST_TEST_REQUIRE(run.metrics.size() == steps, run.output);
  double high = 0, low = 0, dual = 0, kl = 0;
  for (std::size_t n = 0; n < steps; ++n) {
    const json& s = run.metrics[n];
    BOOST_TEST_CONTEXT("step " << n + 1 << ": " << s.dump()) {
      BOOST_TEST(metric(s, {"train/optimizer_steps"}) == 2.0);
      BOOST_TEST(s["trained_to"].get<std::uint64_t>() == n + 1, "one version per step, whatever its optimizer steps");
      BOOST_TEST(metric(s, {"train/probs_ratio"}) != 1.0, "the second optimizer step should see a ratio off 1");
      // lp_prev and lp_gen still come from one version: the generator and trainer agree exactly.
      BOOST_TEST(metric(s, {"train/token_mult_prob_error"}) == 1.0);
      BOOST_TEST(metric(s, {"train/gen_kl_error"}) == 0.0);
      BOOST_TEST(std::isfinite(metric(s, {"train/loss"})));
      high += metric(s, {"train/clipped_high_fraction"});
      low += metric(s, {"train/clipped_low_fraction"});
      dual += metric(s, {"train/clipped_dual_fraction"});
      kl += metric(s, {"train/kl_penalty"});
    }
  }
  BOOST_TEST(high > 0.0, "clip-higher never fired");
  BOOST_TEST(low > 0.0, "the low clip never fired");
  BOOST_TEST(dual > 0.0, "the dual clip never fired");
  BOOST_TEST(kl > 0.0, "the policy never left the reference");
}

BOOST_AUTO_TEST_CASE(a_gemma4_run_with_dynamic_sampling_trains_on_groups_whose_rewards_differ_and_counts_its_rounds) {
  constexpr std::size_t steps = 3;
  const finished_run run = run_recipe(colocated_gemma4, steps,
                                      {"grpo.use_dynamic_sampling=true", "grpo.batch_multiplier=2",
                                       "grpo.dynamic_sampling_max_gen_batches=5"});
  BOOST_TEST_REQUIRE(run.metrics.size() == steps, run.output);
  const std::size_t per_step = 16;  // 4 prompts x 4 generations: the batch, whatever the rounds generated
  BOOST_TEST_REQUIRE(run.generations.size() == steps * per_step);
  for (std::size_t n = 0; n < steps; ++n) {
    const json& s = run.metrics[n];
    BOOST_TEST_CONTEXT("step " << n + 1 << ": " << s.dump()) {
      BOOST_TEST(metric(s, {"train/dynamic_sampling_num_gen_batches"}) >= 1.0);
      BOOST_TEST(metric(s, {"train/dynamic_sampling_num_discarded_valid_samples"}) >= 0.0);
      BOOST_TEST(s["trajectories"].get<std::size_t>() == per_step);
    }
  }
  // Every kept group (one prompt of one round of one step) of two or more samples has rewards
  // that differ: a group whose samples all scored alike carries no signal and was dropped.
  std::map<std::tuple<int, int, int>, std::set<double>> rewards;
  std::map<std::tuple<int, int, int>, int> sizes;
  for (const json& t : run.generations) {
    const auto key = std::make_tuple(t["step"].get<int>(), t["rng"]["round"].get<int>(), t["prompt_index"].get<int>());
    rewards[key].insert(t["raw_reward"].get<double>());
    sizes[key] += 1;
  }
  for (const auto& [key, values] : rewards)
    if (sizes[key] > 1) BOOST_TEST(values.size() > 1u, "step " << std::get<0>(key) << " kept a group whose rewards agree");
}

BOOST_AUTO_TEST_CASE(a_dedicated_gemma4_run_one_step_off_policy_trains_on_batches_one_version_old_generated_while_the_previous_step_trains) {
  // One-step off-policy, two optimizer steps per step, tight clips and a tight TIS cap: every
  // correction of the loss fires in one run (their fractions above 0).
  constexpr std::size_t steps = 4;
  const finished_run run = run_recipe(dedicated_gemma4, steps,
                                      {"grpo.max_trajectory_age_steps=1", "loss_fn.use_importance_sampling_correction=true",
                                       "policy.train_global_batch_size=8",
                                       "loss_fn.ratio_clip_min=0.01", "loss_fn.ratio_clip_max=0.01", "loss_fn.ratio_clip_c=1.02",
                                       "loss_fn.truncated_importance_sampling_ratio=1.01"});
  BOOST_TEST_REQUIRE(run.metrics.size() == steps, run.output);
  // Every trajectory is at most one version older than the weights that train on it: step 1 trains
  // v0 on v0's batch; step k > 1 trains v(k-1) on the batch v(k-2) generated during step k - 1.
  for (const json& t : run.generations) {
    const auto k = t["step"].get<std::uint64_t>(), version = t["version"].get<std::uint64_t>();
    BOOST_TEST_CONTEXT("trajectory " << t["id"] << " of step " << k) {
      BOOST_TEST(version == (k == 1 ? 0 : k - 2));
      BOOST_TEST(k - 1 - version <= 1u, "more than one version old");
    }
  }
  // The trace: the generation of step k + 1 starts before the training of step k ends.
  for (std::size_t n = 0; n + 1 < steps; ++n) {
    const json& s = run.metrics[n];
    std::int64_t generation_ahead = -1, training_finished = -1;
    for (const json& e : s["events"]) {
      const auto step = e["step"].get<std::size_t>();
      if (step == n + 2 && e["event"] == "generation started") generation_ahead = e["sequence"].get<std::int64_t>();
      if (step == n + 1 && e["event"] == "training finished") training_finished = e["sequence"].get<std::int64_t>();
    }
    BOOST_TEST_CONTEXT("step " << n + 1 << ": " << s["events"].dump()) {
      BOOST_TEST_REQUIRE(generation_ahead >= 0);
      BOOST_TEST_REQUIRE(training_finished >= 0);
      BOOST_TEST(generation_ahead < training_finished);
    }
  }
  // The last step generates nothing ahead.
  for (const json& e : run.metrics.back()["events"]) BOOST_TEST(e["step"].get<std::size_t>() == steps);
  double high = 0, low = 0, dual = 0, oob = 0;
  for (std::size_t n = 0; n < steps; ++n) {
    const json& s = run.metrics[n];
    BOOST_TEST_CONTEXT("step " << n + 1 << ": " << s.dump()) {
      BOOST_TEST(s["generated_with"].get<std::uint64_t>() == (n == 0 ? 0 : n - 1));
      if (n > 0) BOOST_TEST(metric(s, {"train/token_mult_prob_error"}) > 1.0, "an off-policy batch agrees exactly");
      high += metric(s, {"train/clipped_high_fraction"});
      low += metric(s, {"train/clipped_low_fraction"});
      dual += metric(s, {"train/clipped_dual_fraction"});
      oob += metric(s, {"train/is_oob_ratio"});
    }
  }
  BOOST_TEST(high > 0.0, "clip-higher never fired");
  BOOST_TEST(low > 0.0, "the low clip never fired");
  BOOST_TEST(dual > 0.0, "the dual clip never fired");
  BOOST_TEST(oob > 0.0, "the importance-sampling truncation never fired");
}

BOOST_AUTO_TEST_SUITE_END()
