// The RL settings one GRPO step needs, read once from a resolved recipe so callers do not pick
// recipe fields one by one, and checked together: every count at least 1, every product within
// int64, the step's samples a whole number of global batches, the reward and advantage settings
// usable.
#pragma once

#include <cstdint>

#include "orchestration/config/recipe.h"
#include "orchestration/rl/advantages.h"
#include "orchestration/rl/dynamic_sampling.h"
#include "orchestration/rl/group_baseline.h"
#include "orchestration/rl/rewards.h"
#include "orchestration/rl/rl_error.h"

namespace tandem::rl {

struct step_settings {
  std::int64_t num_prompts_per_step = 0;
  std::int64_t num_generations_per_prompt = 0;
  std::int64_t samples_per_step = 0;   ///< prompts x generations: the samples one step trains on
  std::int64_t prompts_per_round = 0;  ///< prompts of one generation round (x batch_multiplier with dynamic sampling)
  std::int64_t samples_per_round = 0;  ///< prompts_per_round x generations
  reward_scaling scaling;
  overlong_shaping shaping;
  baseline_kind baseline = baseline_kind::mean;  ///< leave_one_out with use_leave_one_out_baseline
  advantage_settings advantages;
  bool use_dynamic_sampling = false;
  dynamic_sampling_settings dynamic_sampling;  ///< target = samples_per_step; used only when enabled
  bool overlong_filtering = false;
  std::int64_t train_global_batch_size = 0;
  std::int64_t optimizer_steps_per_step = 0;  ///< samples_per_step / train_global_batch_size
};

/// The step settings of a resolved recipe. Errors: invalid_setting (a count below 1, unusable
/// reward or advantage settings), count_overflow, does_not_divide (samples_per_step is not a
/// multiple of policy.train_global_batch_size).
rl_result<step_settings> make_step_settings(const config::recipe_config& r);

}  // namespace tandem::rl
