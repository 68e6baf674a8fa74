// What a `tandem run` with the fake engines must show, shared by the runtime's run tests: every
// step trained on trajectories of the newest weights, identical data-parallel ranks, and each
// trajectory's tokens recomputed from the weights digest of the version it names.
#pragma once

#include <boost/test/unit_test.hpp>

#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/runtime/engine_factory.hpp"
#include "actors/runtime/recipe_settings.hpp"
#include "gpu/engine/fake/fake_generate_engine.h"
#include "gpu/engine/fake/fake_train_engine.h"
#include "orchestration/config/resolve.h"
#include "process_support.hpp"

namespace runtime_test {

using json = nlohmann::json;

inline const std::string colocated_recipe = std::string(TANDEM_SOURCE_DIR) + "/configs/recipes/tiny-fake-cpu.yaml";

/// A `tandem run` of `recipe` writing its logs under `logs`, with the fake engines and `extra`
/// overrides.
inline std::vector<std::string> run_args(const std::string& recipe, const std::filesystem::path& logs,
                                  const std::vector<std::string>& extra) {
  std::vector<std::string> a = {tandem_binary, "run", recipe, "runtime.engine=fake", "logger.log_dir=" + logs.string()};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

inline std::vector<json> records(const std::filesystem::path& file) {
  std::vector<json> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(json::parse(line));
  return out;
}

inline std::uint64_t digest(const json& hex) { return std::stoull(hex.get<std::string>(), nullptr, 16); }

/// Step `step`'s trajectories (generations.jsonl's step numbers, from 1) generated again outside
/// the run by the generator make_engines builds from `config` (policy.model_name: the weights the
/// step was generated with; its backend, device 0), each request at the coordinates the run
/// recorded and in the run's order: one line per trajectory whose tokens differ (empty: none).
inline std::vector<std::string> regenerated_differently(const tandem::config::recipe_config& config,
                                                        const std::vector<json>& generations, int step) {
  auto generator = tandem::make_engines(config, false, true, nullptr);
  BOOST_TEST_REQUIRE(bool(generator), (generator ? std::string() : generator.error().message()));
  std::vector<tandem::gpu::generation_request> requests;
  std::vector<std::vector<std::int32_t>> recorded;
  for (const json& t : generations) {
    if (t["step"].get<int>() != step) continue;
    tandem::gpu::generation_request r;
    r.id = requests.size();
    r.prompt = t["prompt"].get<std::vector<std::int32_t>>();
    r.sampling = tandem::sampling_settings(config);
    r.rng = {t["rng"]["seed"].get<std::uint64_t>(), t["rng"]["step"].get<std::uint32_t>(), t["rng"]["round"].get<std::uint32_t>(),
             t["rng"]["prompt"].get<std::uint32_t>(), t["rng"]["sample"].get<std::uint32_t>(), 0};
    r.max_new_tokens = static_cast<std::int32_t>(config.policy.generation.max_new_tokens);
    requests.push_back(std::move(r));
    recorded.push_back(t["tokens"].get<std::vector<std::int32_t>>());
  }
  BOOST_TEST_REQUIRE(!requests.empty(), "no trajectory of step " << step);
  const auto submitted = generator->generate->submit(requests);
  BOOST_TEST_REQUIRE(bool(submitted), submitted.message());
  std::vector<std::vector<std::int32_t>> again(requests.size());
  for (;;) {
    auto left = generator->generate->step();
    BOOST_TEST_REQUIRE(bool(left), (left ? std::string() : left.error().message()));
    for (auto& f : generator->generate->collect()) again[f.id] = f.tokens;
    if (*left == 0) break;
  }
  std::vector<std::string> differing;
  for (std::size_t i = 0; i < requests.size(); ++i)
    if (again[i] != recorded[i])
      differing.push_back("step " + std::to_string(step) + " trajectory " + std::to_string(i) + ": " +
                          json(recorded[i]).dump() + " in the run, " + json(again[i]).dump() + " again");
  return differing;
}

/// The recipe as the run resolved it (for the fake model's options and the sampling settings).
inline tandem::config::recipe_config resolved(const std::string& recipe, const std::vector<std::string>& overrides) {
  auto r = tandem::config::resolve_recipe(recipe, overrides);
  BOOST_TEST_REQUIRE(r.errors.empty(), tandem::config::to_string(r.errors));
  return r.recipe->config;
}

/// Every check of a successful run: steps, versions, identical data-parallel weights, and each
/// trajectory's tokens recomputed from the weights of the version it names.
/// `env`: more environment for the run; `during`: called once the run started; what it returns
/// (an attacker) lives until the run ended; the checks follow. Returns the run's stdout and stderr.
inline std::string check_run(const std::string& recipe, const std::vector<std::string>& overrides, std::size_t steps,
                      std::size_t buckets, const std::vector<std::pair<std::string, std::string>>& env = {},
                      const std::function<std::shared_ptr<void>(child_process&)>& during = {}) {
  tandem::test::temp_dir dir;
  std::vector<std::string> all = overrides;
  all.push_back("grpo.max_num_steps=" + std::to_string(steps));
  child_process run(run_args(recipe, dir.path(), all), env);
  std::shared_ptr<void> alongside = during ? during(run) : nullptr;
  const int code = run.exit_code(std::chrono::milliseconds(120000));
  alongside.reset();
  BOOST_TEST(code == 0, run.output());
  if (code != 0) return run.out() + run.err();

  std::vector<std::string> resolved_overrides = all;
  resolved_overrides.push_back("runtime.engine=fake");
  const auto config = resolved(recipe, resolved_overrides);
  // The trainer every policy rank built from this recipe (the engine factory's), at version 0.
  auto engines = tandem::make_engines(config, true, false, nullptr);
  BOOST_TEST_REQUIRE(bool(engines), (engines ? std::string() : engines.error().message()));
  const auto* trainer = dynamic_cast<const tandem::gpu::fake_train_engine*>(engines->train.get());
  BOOST_TEST_REQUIRE(trainer != nullptr);
  const auto model = trainer->options();
  std::map<std::uint64_t, std::uint64_t> hash_of_version;  // weight version -> digest of its weights
  hash_of_version[0] = trainer->weight_hash();

  const auto steps_log = records(dir.path() / "metrics.jsonl");
  BOOST_TEST(steps_log.size() == steps, run.output());
  if (steps_log.size() != steps) return run.out() + run.err();
  for (std::size_t n = 0; n < steps; ++n) {
    const json& s = steps_log[n];
    BOOST_TEST(s["step"].get<std::size_t>() == n + 1);
    BOOST_TEST(s["generated_with"].get<std::uint64_t>() == n, "step " << n + 1 << " used stale weights");
    BOOST_TEST(s["trained_to"].get<std::uint64_t>() == n + 1);
    BOOST_TEST(s["refit"]["buckets"].get<std::size_t>() == buckets);
    const auto& digests = s["weights_digests"];
    BOOST_TEST_REQUIRE(digests.size() == 2u);
    BOOST_TEST(digest(digests[0]) == digest(digests[1]), "data-parallel ranks differ after step " << n + 1);
    BOOST_TEST(digest(digests[0]) != hash_of_version.at(n), "step " << n + 1 << " left the weights unchanged");
    hash_of_version[n + 1] = digest(digests[0]);
  }

  const auto trajectories = records(dir.path() / "generations.jsonl");
  const std::size_t per_step =
      static_cast<std::size_t>(config.grpo.num_prompts_per_step * config.grpo.num_generations_per_prompt);
  BOOST_TEST(trajectories.size() == steps * per_step);
  std::size_t checked = 0;
  for (const json& t : trajectories) {
    const auto step = t["step"].get<std::uint64_t>();
    const auto version = t["version"].get<std::uint64_t>();
    BOOST_TEST(version == step - 1, "a trajectory of step " << step << " came from v" << version << ", not the newest");
    tandem::gpu::generation_request request;
    request.prompt = t["prompt"].get<std::vector<std::int32_t>>();
    request.sampling = tandem::sampling_settings(config);
    request.rng = {t["rng"]["seed"].get<std::uint64_t>(), t["rng"]["step"].get<std::uint32_t>(),
                   t["rng"]["round"].get<std::uint32_t>(), t["rng"]["prompt"].get<std::uint32_t>(),
                   t["rng"]["sample"].get<std::uint32_t>(), 0};
    request.max_new_tokens = static_cast<std::int32_t>(config.policy.generation.max_new_tokens);
    const auto expected = tandem::gpu::fake_generate_engine::expected_tokens(hash_of_version.at(version), request, model.vocab);
    BOOST_TEST(t["tokens"].get<std::vector<std::int32_t>>() == expected,
               "step " << step << " trajectory " << t["id"] << " was not generated by the weights of v" << version);
    ++checked;
  }
  BOOST_TEST(checked == steps * per_step);
  return run.out() + run.err();
}

}  // namespace runtime_test
