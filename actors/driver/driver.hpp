// The driver: the RL loop, one synchronous GRPO step per step request.
//
//   +------+ --step--> generating --every rollout worker answered--> scoring --rewards-->
//   | idle |           computing_logprobs --every policy rank kept its lp_prev--> training
//   +------+           --every rank stepped (version v -> v + 1)--> refitting --v + 1 live--> idle (report)
//      ^
//      +---- any failure (an error, a deadline, a worker declared lost): the step's error, naming the worker
//
//   generating: a round of prompts (the next ones of the prompt set): prompt k goes to rollout
//               worker k % R as samples_per_prompt requests; every trajectory must carry the live
//               version v (else stale_version)
//   scoring:    the environment scores every trajectory; rewards are scaled and shaped, advantages
//               come from each prompt group's baseline and std (step_rewards.hpp). With dynamic
//               sampling the round's groups whose rewards differ join the cache
//               (orchestration/rl/dynamic_sampling.h): short of the step's samples, the next round
//               goes back to generating (round + 1); past max_gen_batches + 1 rounds the step fails
//               saying so; once full, the first samples of the cache are the step's batch
//   computing_logprobs: each rank gets its trajectories once (tokens, prompt lengths, the generator's
//               logprobs; batch.hpp) and keeps them with its lp_prev (and lp_ref with the KL
//               term); it answers with v and, per sequence, the generated tokens its masks
//               exclude (counted, left out of the loss)
//   training:   each rank gets one advantage and loss multiplier per trajectory and, per optimizer
//               step (train_global_batch_size), its share and the global batch's token counts;
//               it builds its micro-batches itself
//   refitting:  the refit coordinator makes v + 1 live on every rollout worker
//
// Between steps (idle) a snapshot request answers where the driver stands (driver_snapshot: the
// live version, the next step, the prompts and examples drawn, the batch generated ahead); a
// driver given that snapshot (driver_config::resume) goes on exactly as this one would.
//
// A warm-up step (sft_step) is a step without generating and scoring: its trajectories are the next
// sft_batch examples (prompt, target), trained on with the cross-entropy of the targets
// (train_objective::cross_entropy), then refitted, so generation and validation see the new
// weights; it counts as a step (its number, a weight version).
//
// In every state but idle a step request is refused (wrong_state). Replies that belong to a step
// already failed are ignored. Every request has a deadline on CAF's clock (config.timeout). The
// refit coordinator's handshake is the controller's job, before the first step. A step that fails
// after training (in the refit) leaves the policy one version ahead of the rollout workers: the
// next step is refused by the version checks (stale_version), and the run resumes from its last
// checkpoint. Multi-turn episodes are not continued yet: env_feedback with done == false is
// counted (step_report::unfinished_episodes) and scored as final.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>

#include "actors/api/driver_actor.hpp"
#include "actors/api/environment_actor.hpp"
#include "actors/api/policy_actor.hpp"
#include "actors/api/refit_coordinator_actor.hpp"
#include "actors/api/rollout_actor.hpp"
#include "actors/driver/step_rewards.hpp"
#include "orchestration/rl/dynamic_sampling.h"

namespace tandem {

struct driver_config {
  std::vector<policy_actor> policy;    ///< data-parallel policy ranks, rank 0 first; >= 1
  std::vector<rollout_actor> rollout;  ///< >= 1
  refit_coordinator_actor refit;       ///< already handshaken
  environment_actor environment;
  std::vector<std::vector<std::int32_t>> prompts;  ///< the prompt set (token ids), drawn epoch after epoch; non-empty
  /// Per prompt, its reference answer (what the environment checks a response against), or empty
  /// when the task has none. Each trajectory carries its prompt's index and answer to scoring.
  std::vector<std::string> answers;
  /// data.shuffle: each epoch over `prompts` in its own seeded order (orchestration/data/prompt_order.h);
  /// false: in order.
  bool shuffle = false;
  /// Prompts the run may draw in all (grpo.max_num_epochs passes); a round past them fails its
  /// step saying so. 0: no limit (the controller ends the run at the epochs' last step instead).
  std::uint64_t max_prompts = 0;
  /// The supervised warm-up's examples (sft_step requests): a prompt and the target that
  /// follows it (ending in a stop token), trained on sft_batch at a time, in the order of
  /// `prompts` (shuffled alike, their own draws). Empty: sft_step is refused.
  struct supervised_example {
    std::vector<std::int32_t> prompt;
    std::vector<std::int32_t> target;
  };
  std::vector<supervised_example> sft_examples;
  std::size_t sft_batch = 0;                       ///< examples per warm-up step, >= 1 with examples
  std::size_t prompts_per_step = 2;                ///< >= 1
  std::size_t samples_per_prompt = 2;              ///< the GRPO group size, >= 1
  std::int32_t max_new_tokens = 8;                 ///< > 0
  std::vector<std::int32_t> stop_tokens;
  gpu::ops::sampling_params sampling;
  gpu::ops::pg_loss_settings loss;
  step_reward_settings rewards;                    ///< scaling, shaping, baseline, advantages, overlong filtering
  /// DAPO dynamic sampling (grpo.use_dynamic_sampling): rounds of prompts_per_round prompts until
  /// the cache holds dynamic_sampling_settings.target_samples samples of groups whose rewards differ.
  bool dynamic_sampling = false;
  std::size_t prompts_per_round = 0;               ///< prompts_per_step x batch_multiplier; 0: prompts_per_step
  rl::dynamic_sampling_settings dynamic_sampling_settings;
  std::int64_t micro_batch_tokens = 1024;         ///< token budget of a micro-batch (each rank cuts its own)
  /// Trajectories per optimizer step (policy.train_global_batch_size); the step's trajectories
  /// must be a multiple of it. 0: the whole step, one optimizer step.
  std::int64_t train_global_batch_size = 0;
  std::uint64_t seed = 1;                          ///< grpo.seed, for the counter RNG
  weight_version initial_version = 0;              ///< live on every worker before the first step
  /// A resumed run: where the checkpoint's driver stood (driver_snapshot); the driver goes on from
  /// there. None: a new run, from step 0 with initial_version live.
  std::optional<driver_snapshot> resume;
  std::chrono::milliseconds timeout{std::chrono::minutes(30)};  ///< per request
  /// 1: one-step off-policy (grpo.max_trajectory_age_steps): the next step's batch is generated
  /// with the live version while this step trains, and the refit waits for it; 0: synchronous.
  std::uint32_t max_trajectory_age_steps = 0;
  /// The last step to run: no batch is generated ahead past it. None: every step generates ahead.
  std::optional<std::uint32_t> last_step;
  /// Called in the driver's context as generation advances: trajectories finished so far out of
  /// the round's total (once at 0 when the round starts, then as each rollout worker answers).
  /// May be empty.
  std::function<void(std::size_t done, std::size_t total)> on_generation_progress;
};

/// Spawns the driver (an event-based actor).
driver_actor spawn_driver(caf::actor_system& sys, driver_config config);

}  // namespace tandem
