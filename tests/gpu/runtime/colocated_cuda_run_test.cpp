// `tandem run` on one CUDA device (cluster.backend cuda): the policy and rollout workers of one
// member share the GPU and take turns on it, the optimizer state offloaded to pinned host memory
// while the generator runs. The tiny Gemma 4 recipe (the all-features test checkpoint, the parity
// task) runs a few steps with a checkpoint after each, and the checks read what it wrote: every
// step's rollouts generated again from the previous step's checkpoint (whose weights carry the
// digest the trainer reported) give the run's tokens, the turns' figures are there, and an op
// failure injected into the training phase fails the run naming the phase and the op.
//
// The program runs from the repository root (as the CUDA tests do) and runs the `tandem` beside
// it (a GPU bundle's bin/) or else the build's.
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

namespace {

/// `tandem` beside this program, else the build tree's (TANDEM_BUILD_EXECUTABLE).
std::string tandem_under_test() {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec && std::filesystem::is_regular_file(self.parent_path() / "tandem", ec)) return (self.parent_path() / "tandem").string();
  return TANDEM_BUILD_EXECUTABLE;
}

}  // namespace

#define TANDEM_EXECUTABLE tandem_under_test()

#include <boost/test/unit_test.hpp>

#include <nlohmann/json.hpp>

#include "actors/runtime/engine_factory.hpp"
#include "integration/runtime/run_checks.hpp"
#include "orchestration/config/resolve.h"

using namespace runtime_test;
using json = nlohmann::json;

namespace {

const std::string recipe = "configs/recipes/tiny-gemma4-cpu.yaml";
const std::vector<std::string> on_one_gpu = {"cluster.backend=cuda", "cluster.gpus_per_node=1",
                                             "policy.offload_optimizer_for_generation=true"};

struct finished_run {
  int code = 0;
  std::string output;
  std::vector<json> metrics, generations;
  tandem::config::recipe_config recipe;
};

finished_run run_on_one_gpu(const std::filesystem::path& dir, std::size_t steps, const std::vector<std::string>& extra,
                            const std::vector<std::pair<std::string, std::string>>& env = {}) {
  std::vector<std::string> args = {tandem_binary, "run", recipe, "logger.log_dir=" + dir.string(),
                                   "grpo.max_num_steps=" + std::to_string(steps)};
  args.insert(args.end(), on_one_gpu.begin(), on_one_gpu.end());
  args.insert(args.end(), extra.begin(), extra.end());
  child_process run(args, env);
  finished_run out;
  out.code = run.exit_code(std::chrono::milliseconds(300000));
  out.output = run.out() + run.err();
  if (out.code != 0) return out;
  out.metrics = records(dir / "metrics.jsonl");
  out.generations = records(dir / "generations.jsonl");
  auto r = tandem::config::resolve_resolved_text(read_text(dir / "recipe.yaml"), "recipe.yaml");
  BOOST_TEST_REQUIRE(r.errors.empty(), tandem::config::to_string(r.errors));
  out.recipe = r.recipe->config;
  return out;
}

/// The digest of the weights in checkpoint directory `weights`, as a policy rank on the run's
/// device loads them.
std::uint64_t digest_of(tandem::config::recipe_config config, const std::filesystem::path& weights) {
  config.policy.model_name = weights.string();
  auto engines = tandem::make_engines(config, true, false, nullptr);
  BOOST_TEST_REQUIRE(bool(engines), (engines ? std::string() : engines.error().message()));
  return engines->weights_digest();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(colocated_cuda_run)

BOOST_AUTO_TEST_CASE(a_colocated_run_on_one_gpu_generates_every_step_with_the_weights_the_trainer_just_produced) {
  constexpr std::size_t steps = 3;
  const tandem::test::temp_dir dir;
  const finished_run run =
      run_on_one_gpu(dir.path(), steps, {"checkpointing.enabled=true", "checkpointing.save_period=1", "grpo.val_period=0"});
  BOOST_TEST_REQUIRE(run.code == 0, run.output);
  BOOST_TEST(run.output.find("gemma4 on cuda:0, bfloat16") != std::string::npos, run.output);
  BOOST_TEST_REQUIRE(run.metrics.size() == steps, run.output);
  auto config = run.recipe;
  std::uint64_t previous = digest_of(config, config.policy.model_name);  // version 0: the checkpoint
  for (std::size_t n = 0; n < steps; ++n) {
    const json& s = run.metrics[n];
    BOOST_TEST_CONTEXT("step " << n + 1) {
      BOOST_TEST(s["generated_with"].get<std::uint64_t>() == n, "generated with stale weights");
      BOOST_TEST(s["trained_to"].get<std::uint64_t>() == n + 1);
      BOOST_TEST(s["refit"]["mode"].get<std::string>() == "colocated");
      // The generator read the weights of version n: generating the step again from the
      // checkpoint of version n (the initial one, or step n's), whose digest is the one the
      // trainer reported, gives the run's tokens.
      const std::filesystem::path weights =
          n == 0 ? std::filesystem::path(config.policy.model_name) : dir.path() / "checkpoints" / ("step_" + std::to_string(n)) / "weights";
      BOOST_TEST(digest_of(config, weights) == previous, "the checkpoint of v" << n << " holds other weights than the trainer's");
      auto at_version = config;
      at_version.policy.model_name = weights.string();
      const auto differing = regenerated_differently(at_version, run.generations, static_cast<int>(n + 1));
      BOOST_TEST(differing.empty(), differing.size() << " trajectories differ: " << (differing.empty() ? "" : differing.front()));
      // The trainer scores the sampled tokens as the generator did (bf16 on both sides).
      BOOST_TEST(s["train/token_mult_prob_error"].get<double>() < 1.005, s.dump());
      const std::uint64_t now = digest(s["weights_digests"][0]);
      BOOST_TEST(now != previous, "the step left the weights unchanged");
      previous = now;
      // The turns: the optimizer state went to host memory for generation (the first time as the
      // member started, logged then) and came back; the device memory in use as each turn ended.
      BOOST_TEST((s["memory/optimizer_offloaded_gib"].get<double>() > 0 || n == 0), s.dump());
      BOOST_TEST(s["timing/train/restore_optimizer"].get<double>() > 0, s.dump());
      BOOST_TEST(s["performance/host_link_gb_per_s"].get<double>() > 0, s.dump());
      BOOST_TEST(s["memory/generation_in_use_gib"].get<double>() > 0, s.dump());
      BOOST_TEST((s.contains("memory/training_in_use_gib") || n == 0), s.dump());
      // Beside each, the dry run's plan for that phase.
      BOOST_TEST(s.contains("memory/generation_planned_gib"), s.dump());
      BOOST_TEST((s.contains("memory/training_planned_gib") || n == 0), s.dump());
    }
  }
}

BOOST_AUTO_TEST_CASE(an_op_failure_injected_into_training_fails_the_run_naming_the_phase_and_the_op) {
  const tandem::test::temp_dir dir;
  const finished_run run = run_on_one_gpu(dir.path(), 2, {}, {{"TANDEM_FAULT_OP", "linear_backward@3"}});
  BOOST_TEST(run.code == 1, run.output);
  BOOST_TEST(run.output.find("train on policy rank") != std::string::npos, run.output);
  BOOST_TEST(run.output.find("linear_backward: injected failure (call 3)") != std::string::npos, run.output);
}

BOOST_AUTO_TEST_SUITE_END()
