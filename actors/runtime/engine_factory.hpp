// The engine factory: what the recipe's engine choices build, in one place. runtime.engine picks
// the train and generate engines behind a member's actors; the same choice, with data.train_dataset
// and env.name, gives the controller's RL loop its training prompts and its reward. Only this
// factory (engine_factory.cpp) knows the fake engines and their task (gpu/engine/fake/); the RL
// loop and the recipe settings see engines, prompts and a scoring function.
//
//   runtime.engine      fake: fake_train_engine / fake_generate_engine over the fake model
//                       (runtime.fake_weight_mb, grpo.seed, policy.max_total_sequence_length)
//                       gemma4: refused (unsupported) until its engines exist
//   data.train_dataset  null: the engines' own prompts (fake: the fake task's); a path: refused
//   env.name            parity: the fake task's parity reward; arithmetic, math: refused
//
// `tandem run` refuses the unbuilt choices before any process starts (the recipe's not-built
// rules); the refusals here are the defensive second line, each naming its key and value.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "actors/environment/scoring.hpp"
#include "gpu/comm/communicator.h"
#include "gpu/core/status.h"
#include "gpu/engine/generate_engine.h"
#include "gpu/engine/train_engine.h"
#include "gpu/engine/weight_manifest.h"
#include "orchestration/config/recipe.h"

namespace tandem {

struct member_engines {
  std::shared_ptr<gpu::train_engine> train;        ///< when the member hosts a policy rank
  std::shared_ptr<gpu::generate_engine> generate;  ///< when it hosts a rollout worker
  gpu::weight_manifest rollout_layout;             ///< the generator's own layout (the policy's manifest must equal it)
  /// A hash of the trainer's weights now (0: the engine offers none); called between engine calls.
  std::function<std::uint64_t()> weights_digest;
  std::shared_ptr<gpu::communicator> data_parallel;  ///< kept alive as long as the trainer uses it
};

/// The engines for a member hosting a policy rank and/or a rollout worker. Colocated: the
/// generator reads the trainer's weights in place. `data_parallel` is the ring of the policy ranks
/// (null for a single rank). Fails (unsupported) for runtime.engine gemma4 until its engines exist,
/// (invalid_argument) for a fake model or train options the engines refuse.
gpu::result<member_engines> make_engines(const config::recipe_config& recipe, bool policy, bool rollout,
                                         std::shared_ptr<gpu::communicator> data_parallel);

/// The prompt set (token ids) the driver cycles through: data.train_dataset null gives the
/// engines' own prompts (runtime.engine fake: 64 prompts of the fake task, a pure function of
/// grpo.seed). Fails (unsupported) for a dataset path and for gemma4, which has no prompts of its
/// own.
gpu::result<std::vector<std::vector<std::int32_t>>> training_prompts(const config::recipe_config& recipe);

/// The scoring function of env.name: parity scores the fake task's parity reward (1 for an even
/// last generated token, else 0; single-turn). Fails (unsupported) for arithmetic and math.
gpu::result<scoring_function> reward_for(const config::recipe_config& recipe);

}  // namespace tandem
