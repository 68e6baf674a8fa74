// From a step's scored trajectories to what training needs, with the GRPO/DAPO formulas of
// orchestration/rl/ (NeMo-RL's order): the raw rewards are scaled, then overlong-shaped; each
// prompt group gets its baseline (mean or leave-one-out, over the shaped rewards) and std (over
// the unshaped ones); the advantage is reward minus baseline, divided by std + 1e-6 when
// normalising, then clamped; overlong filtering gives truncated samples a loss multiplier of 0.
#pragma once

#include <cstdint>
#include <vector>

#include "actors/api/messages.hpp"
#include "orchestration/rl/advantages.h"
#include "orchestration/rl/group_baseline.h"
#include "orchestration/rl/rewards.h"
#include "orchestration/rl/rl_error.h"

namespace tandem {

/// The reward side of a step's settings (grpo.* keys).
struct step_reward_settings {
  rl::reward_scaling scaling;
  rl::overlong_shaping shaping;
  rl::baseline_kind baseline = rl::baseline_kind::mean;
  rl::advantage_settings advantages;
  bool overlong_filtering = false;
};

/// Per trajectory, in the step's order.
struct step_rewards {
  std::vector<double> raw;               ///< the environment's rewards
  std::vector<double> unshaped;          ///< scaled, not shaped (the group std's reward; dynamic sampling tests it)
  std::vector<double> total;             ///< scaled, then shaped
  std::vector<double> advantages;        ///< per sample, broadcast to its tokens by the micro-batches
  std::vector<double> loss_multipliers;  ///< 0: the sample is left out of the loss (overlong filtering)
  std::int64_t filtered = 0;             ///< samples with multiplier 0
};

/// `raw[i]` is trajectories[i]'s reward; a prompt group is the trajectories of one group id,
/// `groups[i]` in [0, group_count). Errors (invalid_input, invalid_setting): a reward that is not
/// finite, a group out of range, unusable settings; the message names the sample.
rl::rl_result<step_rewards> compute_step_rewards(const std::vector<trajectory>& trajectories, const std::vector<double>& raw,
                                                 const std::vector<std::int64_t>& groups, std::int64_t group_count,
                                                 const step_reward_settings& s);

/// As above, each trajectory's group its prompt_index, in [0, prompts).
rl::rl_result<step_rewards> compute_step_rewards(const std::vector<trajectory>& trajectories, const std::vector<double>& raw,
                                                 std::int64_t prompts, const step_reward_settings& s);

}  // namespace tandem
