// The driver: the RL loop, one synchronous GRPO step per step request.
//
//   +------+ --step--> generating --every rollout worker answered--> scoring --rewards-->
//   | idle |           computing_logprobs --lp_prev from every policy rank--> training
//   +------+           --every rank stepped (version v -> v + 1)--> refitting --v + 1 live--> idle (report)
//      ^
//      +---- any failure (an error, a deadline, a worker declared lost): the step's error, naming the worker
//
//   generating: prompt k of the step goes to rollout worker k % R as samples_per_prompt requests;
//               every trajectory must carry the live version v (else stale_version)
//   scoring:    the environment scores every trajectory; rewards are scaled and shaped, advantages
//               come from each prompt group's baseline and std (step_rewards.hpp)
//   computing_logprobs: the packed sequences, split over the policy ranks; each must answer with v
//   training:   each rank gets its share as micro-batches, with global token counts
//   refitting:  the refit coordinator makes v + 1 live on every rollout worker
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
#include <vector>

#include <caf/actor_system.hpp>

#include "actors/api/driver_actor.hpp"
#include "actors/api/environment_actor.hpp"
#include "actors/api/policy_actor.hpp"
#include "actors/api/refit_coordinator_actor.hpp"
#include "actors/api/rollout_actor.hpp"
#include "actors/driver/step_rewards.hpp"

namespace tandem {

struct driver_config {
  std::vector<policy_actor> policy;    ///< data-parallel policy ranks, rank 0 first; >= 1
  std::vector<rollout_actor> rollout;  ///< >= 1
  refit_coordinator_actor refit;       ///< already handshaken
  environment_actor environment;
  std::vector<std::vector<std::int32_t>> prompts;  ///< the prompt set (token ids), cycled through; non-empty
  std::size_t prompts_per_step = 2;                ///< >= 1
  std::size_t samples_per_prompt = 2;              ///< the GRPO group size, >= 1
  std::int32_t max_new_tokens = 8;                 ///< > 0
  std::vector<std::int32_t> stop_tokens;
  gpu::ops::sampling_params sampling;
  gpu::ops::pg_loss_settings loss;
  step_reward_settings rewards;                    ///< scaling, shaping, baseline, advantages, overlong filtering
  std::int64_t micro_batch_tokens = 1024;         ///< token budget of a micro-batch (make_micro_batches)
  std::uint64_t seed = 1;                          ///< grpo.seed, for the counter RNG
  weight_version initial_version = 0;              ///< live on every worker before the first step
  std::uint32_t first_step = 0;                    ///< the first step's number (resuming runs)
  std::chrono::milliseconds timeout{std::chrono::minutes(30)};  ///< per request
};

/// Spawns the driver (an event-based actor).
driver_actor spawn_driver(caf::actor_system& sys, driver_config config);

}  // namespace tandem
