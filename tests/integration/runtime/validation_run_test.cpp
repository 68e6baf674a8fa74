// `tandem run` with validation (grpo.val_period, val_at_start, val_at_end) on the fake engines:
// the default recipe's two colocated members, env.name parity, no validation dataset, so every
// pass validates on the parity task's held-out prompts. The checks read metrics.jsonl and the
// run's lines, and recompute each pass's accuracy and average length from the weights digest of
// the version it validated (the fake generator's greedy tokens are a pure function of it).
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/driver/validation.hpp"
#include "gpu/engine/parity_task.h"
#include "run_checks.hpp"

using namespace runtime_test;
using json = nlohmann::json;

namespace {

/// What a finished run left: metrics.jsonl, its lines, the recipe it resolved and its directory.
struct validated_run {
  tandem::test::temp_dir dir;
  std::vector<json> metrics;
  std::string output;
  tandem::config::recipe_config recipe;
};

/// Runs the default recipe (fake engines, 1 MiB of weights) with `overrides`; requires exit 0.
std::unique_ptr<validated_run> run_validating(const std::vector<std::string>& overrides) {
  auto out = std::make_unique<validated_run>();
  std::vector<std::string> all = {"runtime.fake_weight_mb=1"};
  all.insert(all.end(), overrides.begin(), overrides.end());
  child_process run(run_args(colocated_recipe, out->dir.path(), all));
  const int code = run.exit_code(std::chrono::milliseconds(100000));
  out->output = run.out() + run.err();
  BOOST_TEST_REQUIRE(code == 0, run.output());
  out->metrics = records(out->dir.path() / "metrics.jsonl");
  all.push_back("runtime.engine=fake");
  out->recipe = resolved(colocated_recipe, all);
  return out;
}

/// The weights digest of each version: v0 from the engine factory's trainer, v(n) from step n's
/// record (every step n has a record holding train metrics).
std::map<std::uint64_t, std::uint64_t> hashes_of_versions(const validated_run& run) {
  std::map<std::uint64_t, std::uint64_t> out;
  auto engines = tandem::make_engines(run.recipe, true, false, nullptr);
  BOOST_TEST_REQUIRE(bool(engines));
  out[0] = dynamic_cast<const tandem::gpu::fake_train_engine&>(*engines->train).weight_hash();
  for (const json& m : run.metrics)
    if (m.contains("trained_to")) out[m["trained_to"].get<std::uint64_t>()] = digest(m["weights_digests"][0]);
  return out;
}

struct expected_pass {
  double accuracy = 0, avg_length = 0;
};

/// A pass after `step` steps with the weights hashing to `hash`, recomputed: every held-out prompt
/// generated greedily (validation.hpp's requests) and scored with the parity reward.
expected_pass recompute(const tandem::config::recipe_config& recipe, std::uint32_t step, std::uint64_t hash) {
  const auto prompts = tandem::validation_prompts(recipe);
  BOOST_TEST_REQUIRE(bool(prompts));
  BOOST_TEST_REQUIRE(prompts->size() == static_cast<std::size_t>(recipe.grpo.max_val_samples));
  expected_pass out;
  for (std::size_t k = 0; k < prompts->size(); ++k) {
    tandem::gpu::generation_request r;
    r.id = k;
    r.prompt = (*prompts)[k];
    r.sampling = {0.0, 0, 1.0};
    r.rng = {static_cast<std::uint64_t>(recipe.grpo.seed), step, tandem::validation_round, static_cast<std::uint32_t>(k), 0, 0};
    r.max_new_tokens = static_cast<std::int32_t>(recipe.policy.generation.max_new_tokens);
    if (recipe.policy.generation.stop_token_ids)
      for (const auto t : *recipe.policy.generation.stop_token_ids) r.stop_tokens.push_back(static_cast<std::int32_t>(t));
    const auto tokens = tandem::gpu::fake_generate_engine::expected_tokens(hash, r, 64);
    out.accuracy += tandem::gpu::parity_reward(tokens);
    out.avg_length += static_cast<double>(tokens.size());
  }
  out.accuracy /= static_cast<double>(prompts->size());
  out.avg_length /= static_cast<double>(prompts->size());
  return out;
}

/// The record of `step` (the first one), or null.
const json* record_of(const validated_run& run, std::int64_t step) {
  for (const json& m : run.metrics)
    if (m["step"].get<std::int64_t>() == step) return &m;
  return nullptr;
}

/// The steps whose records hold validation metrics.
std::vector<std::int64_t> validated_steps(const validated_run& run) {
  std::vector<std::int64_t> out;
  for (const json& m : run.metrics)
    if (m.contains("validation/accuracy")) out.push_back(m["step"].get<std::int64_t>());
  return out;
}

std::size_t count(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

/// Checks the validation metrics of step `step`'s record against the pass recomputed with v(version).
void check_pass(const validated_run& run, std::int64_t step, std::uint64_t version) {
  BOOST_TEST_CONTEXT("validation at step " << step) {
    const json* m = record_of(run, step);
    BOOST_TEST_REQUIRE(m != nullptr);
    const auto want = recompute(run.recipe, static_cast<std::uint32_t>(step), hashes_of_versions(run).at(version));
    BOOST_TEST((*m)["validation/accuracy"].get<double>() == want.accuracy, boost::test_tools::tolerance(1e-12));
    BOOST_TEST((*m)["validation/avg_length"].get<double>() == want.avg_length, boost::test_tools::tolerance(1e-12));
    BOOST_TEST((*m)["validation/accuracy"].get<double>() >= 0.0);
    BOOST_TEST((*m)["validation/accuracy"].get<double>() <= 1.0);
    BOOST_TEST((*m)["timing/validation/total"].get<double>() >= 0.0);
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(validation_run_test)

BOOST_AUTO_TEST_CASE(a_run_with_val_period_2_over_4_steps_records_validation_accuracy_after_steps_2_and_4) {
  // 10 held-out prompts in rounds of 4: 3 rounds per pass; responses end at a stop token or at 8 tokens.
  const auto run = run_validating({"grpo.max_num_steps=4", "grpo.val_period=2", "grpo.max_val_samples=10",
                                   "grpo.val_batch_size=4", "policy.generation.max_new_tokens=8",
                                   "policy.generation.stop_token_ids=[10, 20, 30, 40, 50]",
                                   "logger.tensorboard_enabled=true"});
  BOOST_TEST_REQUIRE(run->metrics.size() == 4u);
  BOOST_TEST(validated_steps(*run) == (std::vector<std::int64_t>{2, 4}), boost::test_tools::per_element());
  check_pass(*run, 2, 2);  // after step n, v(n) is live on the rollout workers
  check_pass(*run, 4, 4);
  for (const std::int64_t step : {2, 4})
    BOOST_TEST(count(run->output, "validation after step " + std::to_string(step) + ": accuracy ") == 1u, run->output);
  BOOST_TEST(count(run->output, " over 10 prompts in 3 rounds, avg length ") == 2u, run->output);
  BOOST_TEST(count(run->output, "validation after step ") == 2u, run->output);  // none after odd steps
  BOOST_TEST(count(run->output, "validation before step ") == 0u, run->output);
  // TensorBoard gets the same scalars as the records.
  std::string events;
  for (const auto& e : std::filesystem::directory_iterator(run->dir.path()))
    if (e.path().filename().string().starts_with("events.out.tfevents.")) events = read_text(e.path());
  BOOST_TEST(events.find("validation/accuracy") != std::string::npos);
  BOOST_TEST(events.find("timing/validation/total") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(val_at_start_records_a_validation_pass_at_step_0_with_the_initial_weights) {
  const auto run = run_validating({"grpo.max_num_steps=2", "grpo.val_at_start=true", "grpo.max_val_samples=6",
                                   "logger.num_val_samples_to_print=2"});
  BOOST_TEST_REQUIRE(run->metrics.size() == 3u);
  const json& first = run->metrics.front();
  BOOST_TEST(first["step"].get<std::int64_t>() == 0);
  BOOST_TEST(first.size() == 4u, first.dump());  // step and the validation metrics only
  check_pass(*run, 0, 0);
  BOOST_TEST(validated_steps(*run) == (std::vector<std::int64_t>{0}), boost::test_tools::per_element());
  BOOST_TEST(count(run->output, "validation before step 1: accuracy ") == 1u, run->output);
  BOOST_TEST(count(run->output, " over 6 prompts in 1 round, ") == 1u, run->output);
  // logger.num_val_samples_to_print: the first two samples, one line each.
  BOOST_TEST(count(run->output, "validation sample 0: prompt [") == 1u, run->output);
  BOOST_TEST(count(run->output, "validation sample 1: prompt [") == 1u, run->output);
  BOOST_TEST(count(run->output, "validation sample 2:") == 0u, run->output);
}

BOOST_AUTO_TEST_CASE(val_at_end_validates_after_the_last_step_once_even_when_val_period_also_falls_on_it) {
  const auto both = run_validating({"grpo.max_num_steps=3", "grpo.val_period=3", "grpo.val_at_end=true",
                                    "grpo.max_val_samples=4"});
  BOOST_TEST(validated_steps(*both) == (std::vector<std::int64_t>{3}), boost::test_tools::per_element());
  BOOST_TEST(count(both->output, "validation after step 3: ") == 1u, both->output);
  check_pass(*both, 3, 3);
  const auto end_only = run_validating({"grpo.max_num_steps=3", "grpo.val_period=2", "grpo.val_at_end=true",
                                        "grpo.max_val_samples=4"});
  BOOST_TEST(validated_steps(*end_only) == (std::vector<std::int64_t>{2, 3}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()
