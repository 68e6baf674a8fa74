// Reward post-processing as NeMo-RL's driver does it after a rollout, in its order:
//   1. scaling: clamp the raw reward to [source_min, source_max], then map that range linearly
//      onto [target_min, target_max] (Gemma 4 recipes: {0, 1} -> {-1, +1});
//   2. DAPO overlong shaping: with expected = max_response_length - overlong_buffer_length,
//      r += min(-(length - expected) / overlong_buffer_length * overlong_buffer_penalty, 0);
//      responses up to `expected` tokens are unchanged, the penalty ramps over the buffer and
//      is not clamped below (past max_response_length it keeps growing).
// The scaled reward before shaping is kept as the "unshaped" reward: dynamic sampling and the std
// of a group use it, the baseline and the train/reward metric use the shaped ("total") one.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "orchestration/rl/rl_error.h"
#include "orchestration/rl/sample_outcome.h"

namespace tandem::rl {

struct reward_scaling {
  bool enabled = false;
  double source_min = 0, source_max = 1;  ///< raw rewards are clamped to this range ...
  double target_min = 0, target_max = 1;  ///< ... then mapped linearly onto this one
};

struct overlong_shaping {
  bool enabled = false;
  std::int64_t overlong_buffer_length = 0;  ///< tokens before max_response_length where the penalty ramps
  double overlong_buffer_penalty = 0;       ///< the penalty at max_response_length
  std::int64_t max_response_length = 0;
};

/// The rewards of a step's samples after post-processing, one entry per sample each.
struct processed_rewards {
  std::vector<double> unshaped;  ///< scaled (or raw when scaling is off), before shaping
  std::vector<double> total;     ///< scaled, then shaped: what the baseline and advantages use
};

/// nullopt when the settings can be used (checked only when enabled): finite, source_max >
/// source_min. Error: invalid_setting.
std::optional<rl_error> check_settings(const reward_scaling& s);

/// nullopt when the settings can be used (checked only when enabled): overlong_buffer_length >= 1,
/// max_response_length > overlong_buffer_length, penalty finite and >= 0. Error: invalid_setting.
std::optional<rl_error> check_settings(const overlong_shaping& s);

/// The scaled rewards (a copy when scaling is off). Errors: invalid_setting (a setting not
/// finite, source_max <= source_min), invalid_input (a reward not finite: "raw_rewards[3] is nan").
rl_result<std::vector<double>> scale_rewards(const reward_scaling& s, std::span<const double> raw_rewards);

/// `rewards` with the overlong penalty added (a copy when shaping is off). Errors:
/// invalid_setting (overlong_buffer_length < 1, max_response_length <= overlong_buffer_length,
/// penalty negative or not finite), invalid_input (sizes differ, a reward not finite, a length
/// below 0).
rl_result<std::vector<double>> shape_overlong(const overlong_shaping& s, std::span<const double> rewards,
                                              std::span<const std::int64_t> response_lengths);

/// Scaling then shaping over a rollout's samples; the errors of both.
rl_result<processed_rewards> process_rewards(const reward_scaling& scaling, const overlong_shaping& shaping,
                                             std::span<const sample_outcome> samples);

}  // namespace tandem::rl
