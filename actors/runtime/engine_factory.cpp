// The engine factory (engine_factory.hpp): the one place that builds the fake engines and hands
// out the fake task.
#include "actors/runtime/engine_factory.hpp"

#include <string>
#include <utility>

#include "actors/runtime/recipe_settings.hpp"
#include "gpu/engine/fake/fake_generate_engine.h"
#include "gpu/engine/fake/fake_task.h"
#include "gpu/engine/fake/fake_train_engine.h"

namespace tandem {
namespace {

/// Prompts in the fake task's set (the driver cycles through them).
constexpr std::size_t fake_prompt_count = 64;

gpu::status not_built(const std::string& what) { return {gpu::status_code::unsupported, what}; }

/// The fake model of runtime.engine fake: runtime.fake_weight_mb of weights in 8 tensors,
/// initialised from grpo.seed, a 64-token vocabulary, policy.max_total_sequence_length.
gpu::fake_model_options fake_model_of(const config::recipe_config& recipe) {
  gpu::fake_model_options o;
  o.weight_bytes = recipe.runtime.fake_weight_mb << 20;
  o.tensors = 8;
  o.seed = static_cast<std::uint64_t>(recipe.grpo.seed);
  o.vocab = 64;
  o.max_sequence_length = static_cast<std::int32_t>(recipe.policy.max_total_sequence_length);
  return o;
}

const char* name_of(config::environment_kind e) {
  switch (e) {
    case config::environment_kind::parity: return "parity";
    case config::environment_kind::arithmetic: return "arithmetic";
    case config::environment_kind::math: return "math";
  }
  return "?";
}

}  // namespace

gpu::result<member_engines> make_engines(const config::recipe_config& recipe, bool policy, bool rollout,
                                         std::shared_ptr<gpu::communicator> data_parallel) {
  if (recipe.runtime.engine != config::engine_kind::fake)
    return not_built("runtime.engine: gemma4: the Gemma 4 train and generate engines are not built yet; "
                     "runtime.engine=fake runs the whole runtime with deterministic fake engines");
  const gpu::fake_model_options model = fake_model_of(recipe);
  if (gpu::status s = gpu::check_fake_model_options(model); !s) return s;
  const gpu::train_engine_options train = train_engine_settings(recipe);
  if (gpu::status s = gpu::check_train_engine_options("policy", train); !s) return s;
  member_engines out;
  out.data_parallel = std::move(data_parallel);
  std::shared_ptr<gpu::fake_train_engine> trainer;
  if (policy) {
    // The engine calls its group from the executor's thread: the engine keeps the group alive, so
    // a member that ends mid-step (a shutdown, a failed run) never leaves a call on a freed group.
    trainer = std::shared_ptr<gpu::fake_train_engine>(new gpu::fake_train_engine(model, train, out.data_parallel.get()),
                                                      [group = out.data_parallel](gpu::fake_train_engine* e) { delete e; });
    out.train = trainer;
    out.weights_digest = [trainer] { return trainer->weights_digest(); };
  } else {
    out.weights_digest = [] { return std::uint64_t{0}; };
  }
  if (rollout) {
    gpu::fake_generate_options g;
    g.model = model;
    g.max_num_sequences = static_cast<std::int32_t>(recipe.policy.generation.max_num_sequences);
    g.bucket_bytes = refit_bucket_bytes(recipe);
    g.verify_checksums = false;  // the rollout worker checks every bucket's checksum itself
    auto generator = std::make_shared<gpu::fake_generate_engine>(g);
    if (trainer && recipe.policy.generation.colocated) {
      if (gpu::status s = generator->share_weights(trainer->shared_weights()); !s) return s;
    }
    out.rollout_layout = generator->manifest();
    out.generate = std::move(generator);
  }
  return out;
}

gpu::result<std::vector<std::vector<std::int32_t>>> training_prompts(const config::recipe_config& recipe) {
  if (recipe.data.train_dataset)
    return not_built("data.train_dataset: " + *recipe.data.train_dataset +
                     ": datasets are not built yet (null: the prompts of runtime.engine: fake)");
  if (recipe.runtime.engine != config::engine_kind::fake)
    return not_built("data.train_dataset: null: runtime.engine gemma4 has no prompts of its own and datasets are "
                     "not built yet; runtime.engine=fake trains on the fake engines' prompts");
  return gpu::fake_prompts(static_cast<std::uint64_t>(recipe.grpo.seed), fake_prompt_count, fake_model_of(recipe).vocab);
}

gpu::result<scoring_function> reward_for(const config::recipe_config& recipe) {
  if (recipe.env.name != config::environment_kind::parity)
    return not_built(std::string("env.name: ") + name_of(recipe.env.name) +
                     ": only the parity environment is built (an even last generated token scores 1); "
                     "arithmetic and math are not built yet");
  return single_turn([](std::span<const std::int32_t> generated) { return gpu::fake_parity_reward(generated); });
}

}  // namespace tandem
