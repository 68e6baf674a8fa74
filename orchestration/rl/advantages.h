// GRPO advantages from rewards and their group statistics (group_baseline.h), as NeMo-RL's GRPO
// estimator computes them:
//   A_i = r_i - b_i;
//   normalize_rewards and std_i > 0:  A_i /= (std_i + 1e-6)   (a group without spread is not sharpened);
//   then clamped to [advantage_clip_low, advantage_clip_high] where set: clip_low is the signed
//   lower bound itself (-5 clamps at -5), not a magnitude.
// Every token of a sample's response takes its A_i.
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "orchestration/rl/group_baseline.h"
#include "orchestration/rl/rl_error.h"

namespace tandem::rl {

/// Added to the std before dividing by it.
inline constexpr double advantage_std_epsilon = 1e-6;

struct advantage_settings {
  bool normalize_rewards = false;
  std::optional<double> clip_low;   ///< lower bound of A (signed, e.g. -5); nullopt: none
  std::optional<double> clip_high;  ///< upper bound of A; nullopt: none
};

/// nullopt when the clip bounds can be used: finite, clip_low <= clip_high. Error: invalid_setting.
std::optional<rl_error> check_settings(const advantage_settings& s);

/// One advantage per sample. `rewards` are the ones the baseline was taken over (the total
/// reward). Errors: invalid_setting (a clip bound not finite, clip_low > clip_high),
/// invalid_input (sizes differ, a value not finite, a std below 0).
rl_result<std::vector<double>> compute_advantages(std::span<const double> rewards, const group_statistics& stats,
                                                  const advantage_settings& s);

}  // namespace tandem::rl
