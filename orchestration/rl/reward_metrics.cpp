// Reward-side step and validation metrics (reward_metrics.h).
#include "orchestration/rl/reward_metrics.h"

#include <algorithm>

#include "orchestration/rl/input_checks.h"
#include "orchestration/rl/pass_at_k.h"

namespace tandem::rl {

namespace {

std::optional<rl_error> not_empty(std::size_t size, const char* name) {
  if (size > 0) return std::nullopt;
  return rl_error{rl_errc::invalid_input, std::string(name) + " holds no samples"};
}

double mean(std::span<const double> v) {
  double sum = 0;
  for (double x : v) sum += x;
  return sum / static_cast<double>(v.size());
}

double mean(std::span<const std::int64_t> v) {
  double sum = 0;
  for (std::int64_t x : v) sum += static_cast<double>(x);
  return sum / static_cast<double>(v.size());
}

}  // namespace

rl_result<train_reward_metrics> compute_train_reward_metrics(std::span<const double> generated_total_rewards,
                                                             std::span<const std::int64_t> generated_lengths,
                                                             std::span<const double> trained_total_rewards) {
  if (auto e = not_empty(generated_total_rewards.size(), "generated_total_rewards")) return *e;
  if (auto e = not_empty(trained_total_rewards.size(), "trained_total_rewards")) return *e;
  if (auto e = check_same_size("generated_lengths", generated_lengths.size(), "generated_total_rewards",
                               generated_total_rewards.size()))
    return *e;
  if (auto e = check_finite(generated_total_rewards, "generated_total_rewards")) return *e;
  if (auto e = check_finite(trained_total_rewards, "trained_total_rewards")) return *e;
  if (auto e = check_not_negative(generated_lengths, "generated_lengths")) return *e;
  train_reward_metrics m;
  m.reward = mean(generated_total_rewards);
  m.filtered_reward = mean(trained_total_rewards);
  m.mean_gen_tokens_per_sample = mean(generated_lengths);
  m.max_gen_tokens_per_sample = *std::max_element(generated_lengths.begin(), generated_lengths.end());
  return m;
}

rl_result<validation_metrics> compute_validation_metrics(std::span<const double> raw_rewards,
                                                         std::span<const std::int64_t> lengths,
                                                         std::int64_t generations_per_prompt) {
  if (auto e = not_empty(raw_rewards.size(), "raw_rewards")) return *e;
  if (auto e = check_same_size("lengths", lengths.size(), "raw_rewards", raw_rewards.size())) return *e;
  if (auto e = check_finite(raw_rewards, "raw_rewards")) return *e;
  if (auto e = check_not_negative(lengths, "lengths")) return *e;
  if (generations_per_prompt < 1)
    return rl_error{rl_errc::invalid_input,
                    "generations_per_prompt is " + std::to_string(generations_per_prompt) + ", below 1"};
  const auto n = static_cast<std::int64_t>(raw_rewards.size());
  if (n % generations_per_prompt != 0)
    return rl_error{rl_errc::invalid_input, std::to_string(n) + " validation samples are not a whole number of " +
                                                "prompts of " + std::to_string(generations_per_prompt) +
                                                " generations"};
  validation_metrics m;
  m.accuracy = mean(raw_rewards);
  m.avg_length = mean(lengths);
  m.k = generations_per_prompt;
  if (generations_per_prompt > 1) {
    std::vector<std::int64_t> groups(raw_rewards.size());
    for (std::size_t i = 0; i < groups.size(); ++i)
      groups[i] = static_cast<std::int64_t>(i) / generations_per_prompt;
    auto p = mean_pass_at_k(groups, n / generations_per_prompt, raw_rewards, generations_per_prompt);
    if (!p) return p.error();
    m.pass_k = *p;
  }
  return m;
}

named_metrics named(const train_reward_metrics& m) {
  return {{"train/reward", m.reward},
          {"train/filtered_reward", m.filtered_reward},
          {"train/mean_gen_tokens_per_sample", m.mean_gen_tokens_per_sample},
          {"train/max_gen_tokens_per_sample", static_cast<double>(m.max_gen_tokens_per_sample)}};
}

named_metrics named(const dynamic_sampling_metrics& m) {
  return {{"train/dynamic_sampling_num_gen_batches", static_cast<double>(m.num_gen_batches)},
          {"train/dynamic_sampling_num_discarded_valid_samples", static_cast<double>(m.num_discarded_valid_samples)}};
}

named_metrics named(const validation_metrics& m) {
  named_metrics out{{"validation/accuracy", m.accuracy}, {"validation/avg_length", m.avg_length}};
  if (m.pass_k) out.emplace_back("validation/pass_k", *m.pass_k);
  return out;
}

}  // namespace tandem::rl
