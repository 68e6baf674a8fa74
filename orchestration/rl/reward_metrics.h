// The reward-side metrics of a GRPO step and of a validation pass, under NeMo-RL's names:
//   train/reward                       mean total (scaled, shaped) reward of the samples
//                                      generated, before dynamic-sampling filtering; may go below
//                                      the scaled range through the overlong penalty
//   train/filtered_reward              mean total reward of the samples trained on
//   train/mean_gen_tokens_per_sample   mean response length of the samples generated
//   train/max_gen_tokens_per_sample    the longest of them
//   train/dynamic_sampling_num_gen_batches, train/dynamic_sampling_num_discarded_valid_samples
//                                      (dynamic_sampling.h), when dynamic sampling is on
//   validation/accuracy                mean raw reward (no scaling, no shaping)
//   validation/avg_length              mean response length
//   validation/pass_k                  pass@k with k = the generations per prompt, when above 1
//                                      (pass_at_k.h)
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "orchestration/rl/dynamic_sampling.h"
#include "orchestration/rl/rl_error.h"

namespace tandem::rl {

struct train_reward_metrics {
  double reward = 0;
  double filtered_reward = 0;
  double mean_gen_tokens_per_sample = 0;
  std::int64_t max_gen_tokens_per_sample = 0;
};

/// `generated_total_rewards` and `generated_lengths`: every sample generated for the step, before
/// filtering; `trained_total_rewards`: the samples trained on. Errors: invalid_input (an empty
/// list, sizes differ, a value not finite, a length below 0).
rl_result<train_reward_metrics> compute_train_reward_metrics(std::span<const double> generated_total_rewards,
                                                             std::span<const std::int64_t> generated_lengths,
                                                             std::span<const double> trained_total_rewards);

struct validation_metrics {
  double accuracy = 0;
  double avg_length = 0;
  std::optional<double> pass_k;  ///< only with several generations per prompt
  std::int64_t k = 1;            ///< the generations per prompt
};

/// Validation samples come prompt by prompt, `generations_per_prompt` consecutive samples each.
/// Errors: invalid_input (no samples, sizes differ, a count that is not a multiple of
/// generations_per_prompt, generations_per_prompt < 1, a value not finite, a length below 0).
rl_result<validation_metrics> compute_validation_metrics(std::span<const double> raw_rewards,
                                                         std::span<const std::int64_t> lengths,
                                                         std::int64_t generations_per_prompt);

using named_metrics = std::vector<std::pair<std::string, double>>;

/// The metrics under their logged names, in the order listed above.
named_metrics named(const train_reward_metrics& m);
named_metrics named(const dynamic_sampling_metrics& m);
named_metrics named(const validation_metrics& m);

}  // namespace tandem::rl
