// The engine factory: what the recipe's engine choices build, in one place. runtime.engine picks
// the train and generate engines behind a member's actors; the same choice, with data.train_dataset
// and env.name, gives the controller's RL loop its training prompts and its reward. Only this
// factory (engine_factory.cpp) knows the fake engines (gpu/engine/fake/); the RL loop and the
// recipe settings see engines, prompts and a scoring function.
//
//   runtime.engine      fake: fake_train_engine / fake_generate_engine over the fake model
//                       (runtime.fake_weight_mb, grpo.seed, policy.max_total_sequence_length)
//                       gemma4: gemma4_train_engine / gemma4_generate_engine over the checkpoint
//                       directory policy.model_name (below), in float32 on cluster.backend cpu,
//                       in bfloat16 on cluster.backend cuda (the member's device of the placement
//                       plan, member_context)
//   the parity task     its prompts (gpu/engine/parity_task.h) over the engines' vocabulary, its
//                       held-out prompts (another seed) and its reward; the external environment's
//                       scoring; the run's task as a whole (datasets, arithmetic, math) is
//                       run_task.hpp's, which calls these for the parity task
//
// The model of runtime.engine gemma4. policy.model_name must be a checkpoint directory here:
// `tandem run` resolves the recipe's value (a directory relative to where it runs or to the
// recipe's folder, a preset, a model in the local Hugging Face cache) once, before any member
// starts, and the recipe every member receives names that directory (an absolute path). A name
// that is not a directory (a published org/name) is refused naming the key; nothing is downloaded.
// policy.generation.stop_token_ids null ends every response at the checkpoint's eos ids
// (config.json's eos_token_id, and those generation_config.json adds); a list, even an empty one,
// replaces them.
//
// The generator's KV cache (gemma4). It is sized for what generation can use: max_num_sequences
// running sequences of policy.max_total_sequence_length tokens at once (each with the blocks of
// a fork and a prefix holder on top), so a step's rollouts never preempt one another. That is
// capped by what the memory plan gives generation (orchestration/topology/memory_plan.h):
// policy.generation.gpu_memory_utilization x cluster.device_memory_gib, less the generator's
// weights (twice on a dedicated rollout member, which stages a refit's copy beside the live one)
// and, colocated, the trainer's gradients and optimizer state beside the shared weights unless
// policy.offload_optimizer_for_generation moves them off the device while it generates
// (activations and scratch are not counted). Under the cap the generator preempts and recomputes
// sequences instead; a cap that cannot hold one full-length sequence is refused naming the keys.
//
// `tandem run` refuses the unbuilt choices before any process starts (the recipe's not-built
// rules); the refusals here are the defensive second line, each naming its key and value.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "actors/environment/scoring.hpp"
#include "actors/runtime/device_turns.hpp"
#include "gpu/comm/communicator.h"
#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"
#include "gpu/engine/gemma4_generate_engine.h"
#include "gpu/engine/generate_engine.h"
#include "gpu/engine/train_engine.h"
#include "gpu/engine/weight_manifest.h"
#include "gpu/model/checkpoint.h"
#include "orchestration/config/recipe.h"

namespace tandem {

struct member_engines {
  std::shared_ptr<gpu::train_engine> train;        ///< when the member hosts a policy rank
  /// With the KL term (loss_fn.reference_policy_kl_penalty > 0) on a policy rank: the frozen
  /// reference policy, a second train engine over the initial weights that only computes
  /// logprobs (its training state offloaded, its gradients released).
  std::shared_ptr<gpu::train_engine> reference;
  std::shared_ptr<gpu::generate_engine> generate;  ///< when it hosts a rollout worker
  gpu::weight_manifest rollout_layout;             ///< the generator's own layout (the policy's manifest must equal it)
  /// A hash of the trainer's weights now (0: the engine offers none); called between engine calls.
  std::function<std::uint64_t()> weights_digest;
  std::shared_ptr<gpu::communicator> data_parallel;  ///< kept alive as long as the trainer uses it
  /// Colocated (one member hosting both engines): their turns on the device, shared by its
  /// policy worker and rollout worker (device_turns.hpp). Null otherwise.
  std::shared_ptr<device_turns> turns;
};

/// The engines for a member hosting a policy rank and/or a rollout worker, on its device
/// `device_index` of its node (the placement plan's; cluster.backend cuda only). Colocated: the
/// generator reads the trainer's weights in place. `data_parallel` is the ring of the policy ranks
/// (null for a single rank). Fails (unsupported) for the fake engines on cuda or a build without
/// CUDA, (invalid_argument) for a device this process cannot see, a fake model, a checkpoint, a KV
/// budget or train options the engines refuse, each naming the recipe key.
gpu::result<member_engines> make_engines(const config::recipe_config& recipe, bool policy, bool rollout,
                                         std::shared_ptr<gpu::communicator> data_parallel, std::int64_t device_index = 0);

/// Where a member's engines compute: the CPU on cluster.backend cpu; on cuda, CUDA device
/// `device_index` (the placement plan's local index), refused (unsupported) in a build without
/// CUDA and (invalid_argument) when this process does not see that device, naming both.
gpu::result<gpu::exec_context> member_context(const config::recipe_config& recipe, std::int64_t device_index);

/// runtime.engine gemma4: the checkpoint policy.model_name names, opened as the engines open it
/// (for float32 on the CPU, bfloat16 on CUDA; every header and name checked, no weight read); invalid_argument "policy.model_name: ..." for
/// a name that is no directory, a broken checkpoint or a directory with a config.json only.
/// `tandem run` calls it before any member starts.
gpu::result<gpu::checkpoint> open_policy_checkpoint(const config::recipe_config& recipe);

/// The options of a gemma4 rollout member's generator over `model` (the KV budget above):
/// policy.generation.max_num_sequences, policy.max_total_sequence_length, policy.refit.bucket_mb.
/// `colocated_trainer`: the member also hosts a policy rank whose weights the generator reads.
gpu::result<gpu::gemma4_generate_options> generate_settings(const config::recipe_config& recipe, const gpu::checkpoint& model,
                                                         bool colocated_trainer);

/// The parity task's prompt set (token ids; run_task.hpp picks it for data.train_dataset null with
/// env.name parity or external): its 64 prompts, a pure function of grpo.seed, over the vocabulary
/// of the engines (fake: 64 tokens from id 2; gemma4: the checkpoint's vocab_size, above every
/// special id its config.json names, read from config.json alone: the controller loads no
/// weights). Fails (invalid_argument naming policy.model_name) for a config.json it cannot read.
gpu::result<std::vector<std::vector<std::int32_t>>> training_prompts(const config::recipe_config& recipe);

/// The parity task's held-out prompts, each validated once per pass: grpo.max_val_samples of them
/// from a seed other than training's (grpo.seed XOR "validate" in ASCII), over the same
/// vocabulary as training_prompts, which fail alike.
gpu::result<std::vector<std::vector<std::int32_t>>> validation_prompts(const config::recipe_config& recipe);

/// The scoring function of env.name parity (1 for an even last generated token, else 0;
/// single-turn) or external (env.external.command's processes). The text tasks (arithmetic,
/// math) are scored over the model's tokenizer by load_run_task (run_task.hpp); here they are
/// refused (invalid_argument).
gpu::result<scoring_function> reward_for(const config::recipe_config& recipe);

}  // namespace tandem
