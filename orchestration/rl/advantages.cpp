// GRPO advantages (advantages.h).
#include "orchestration/rl/advantages.h"

#include <algorithm>
#include <string>

#include "orchestration/rl/input_checks.h"

namespace tandem::rl {

std::optional<rl_error> check_settings(const advantage_settings& s) {
  if (s.clip_low)
    if (auto e = check_finite_setting(*s.clip_low, "advantage_clip_low")) return *e;
  if (s.clip_high)
    if (auto e = check_finite_setting(*s.clip_high, "advantage_clip_high")) return *e;
  if (s.clip_low && s.clip_high && *s.clip_low > *s.clip_high)
    return rl_error{rl_errc::invalid_setting, "advantage_clip_low (" + format_number(*s.clip_low) +
                                                  ") is above advantage_clip_high (" + format_number(*s.clip_high) +
                                                  ")"};
  return std::nullopt;
}

rl_result<std::vector<double>> compute_advantages(std::span<const double> rewards, const group_statistics& stats,
                                                  const advantage_settings& s) {
  if (auto e = check_settings(s)) return *e;
  if (auto e = check_same_size("baseline", stats.baseline.size(), "rewards", rewards.size())) return *e;
  if (auto e = check_same_size("std", stats.std.size(), "rewards", rewards.size())) return *e;
  if (auto e = check_finite(rewards, "rewards")) return *e;
  if (auto e = check_finite(stats.baseline, "baseline")) return *e;
  if (auto e = check_finite(stats.std, "std")) return *e;
  for (std::size_t i = 0; i < stats.std.size(); ++i)
    if (stats.std[i] < 0)
      return rl_error{rl_errc::invalid_input,
                      "std[" + std::to_string(i) + "] is " + format_number(stats.std[i]) + ", below 0"};

  std::vector<double> out(rewards.size());
  for (std::size_t i = 0; i < rewards.size(); ++i) {
    double a = rewards[i] - stats.baseline[i];
    if (s.normalize_rewards && stats.std[i] > 0) a /= stats.std[i] + advantage_std_epsilon;
    if (s.clip_low) a = std::max(a, *s.clip_low);
    if (s.clip_high) a = std::min(a, *s.clip_high);
    out[i] = a;
  }
  return out;
}

}  // namespace tandem::rl
