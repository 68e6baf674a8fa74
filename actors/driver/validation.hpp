// The validation actor: NeMo-RL's validation pass, run by the RL loop between steps while the
// driver is idle. It generates every prompt of the validation set once, greedily, with the weights
// live on the rollout workers, and scores the responses with the environment's raw reward.
//
//   +------+ --validate(v, step)--> generating(round 0) --every rollout worker answered-->
//   | idle |      scoring(round 0) --rewards--> generating(round 1) --> ... scoring(last round)
//   +------+      --rewards--> idle (report)
//      ^
//      +---- any failure (an error, a deadline, a response of another version than v, a member
//            declared lost): the pass's error, naming the rollout worker or the environment
//
//   generating: round r holds prompts [r B, min((r + 1) B, N)) of the N prompts, B = batch_size;
//               prompt k goes to rollout worker k % R as one greedy request (temperature 0, no
//               top-k or top-p) with request id k and rng {seed, step, validation_round, k, 0};
//               every response must carry v (else stale_version naming the worker), and each
//               worker must answer every request it was sent
//   scoring:    the environment scores the round's responses: raw rewards, no scaling, no shaping
//   report:     accuracy = mean raw reward, avg_length = mean generated tokens, over all N
//               (orchestration/rl/reward_metrics.h), and every sample in prompt order
//
// Random streams: a training step s draws from rng {seed, s, round, prompt, sample} with round 0
// (dynamic sampling's later rounds count up from 1, at most 65536 of them). Validation uses round
// validation_round = 2^31, so it never draws a training step's numbers; its prompt coordinate is
// the prompt's index in the whole validation set, so the responses do not depend on batch_size.
// Greedy decoding reads no random numbers on the Gemma 4 engines; the fake engines' tokens are a
// function of them, which keeps the coordinates distinct there too.
//
// In every state but idle a validate request is refused (wrong_state). Replies that belong to a
// pass already failed are ignored. Every request has a deadline on CAF's clock (config.timeout).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>

#include "actors/api/environment_actor.hpp"
#include "actors/api/rollout_actor.hpp"
#include "actors/api/validation_actor.hpp"
#include "gpu/ops/logprobs.h"

namespace tandem {

/// The rng round of every validation request (above every training round).
constexpr std::uint32_t validation_round = std::uint32_t{1} << 31;

struct validation_config {
  std::vector<rollout_actor> rollout;  ///< >= 1, rollout rank order
  environment_actor environment;
  std::vector<std::vector<std::int32_t>> prompts;  ///< the validation set (token ids), each generated once a pass; non-empty
  std::vector<std::string> answers;                ///< per prompt, its reference answer; empty when the task has none
  std::size_t batch_size = 256;                    ///< grpo.val_batch_size: prompts generated at once (a round), >= 1
  std::int32_t max_new_tokens = 8;                 ///< > 0
  std::vector<std::int32_t> stop_tokens;
  /// Greedy: the recipe has no validation sampling keys (NeMo-RL's val temperature and top-p).
  gpu::ops::sampling_params sampling{0.0, 0, 1.0};
  std::uint64_t seed = 1;                          ///< grpo.seed, for the counter RNG
  std::chrono::milliseconds timeout{std::chrono::minutes(30)};  ///< per request
};

/// Spawns the validation actor (an event-based actor).
validation_actor spawn_validation(caf::actor_system& sys, validation_config config);

}  // namespace tandem
