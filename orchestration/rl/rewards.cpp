// Reward scaling and DAPO overlong shaping (rewards.h).
#include "orchestration/rl/rewards.h"

#include <algorithm>
#include <string>

#include "orchestration/rl/input_checks.h"

namespace tandem::rl {

std::optional<rl_error> check_settings(const reward_scaling& s) {
  if (!s.enabled) return std::nullopt;
  if (auto e = check_finite_setting(s.source_min, "reward_scaling.source_min")) return e;
  if (auto e = check_finite_setting(s.source_max, "reward_scaling.source_max")) return e;
  if (auto e = check_finite_setting(s.target_min, "reward_scaling.target_min")) return e;
  if (auto e = check_finite_setting(s.target_max, "reward_scaling.target_max")) return e;
  if (!(s.source_max > s.source_min))
    return rl_error{rl_errc::invalid_setting, "reward_scaling.source_max (" + format_number(s.source_max) +
                                                  ") must be greater than reward_scaling.source_min (" +
                                                  format_number(s.source_min) + ")"};
  return std::nullopt;
}

std::optional<rl_error> check_settings(const overlong_shaping& s) {
  if (!s.enabled) return std::nullopt;
  if (s.overlong_buffer_length < 1)
    return rl_error{rl_errc::invalid_setting, "reward_shaping.overlong_buffer_length is " +
                                                  std::to_string(s.overlong_buffer_length) + ", below 1"};
  if (s.max_response_length <= s.overlong_buffer_length)
    return rl_error{rl_errc::invalid_setting,
                    "reward_shaping.max_response_length (" + std::to_string(s.max_response_length) +
                        ") must be greater than reward_shaping.overlong_buffer_length (" +
                        std::to_string(s.overlong_buffer_length) + ")"};
  if (auto e = check_finite_setting(s.overlong_buffer_penalty, "reward_shaping.overlong_buffer_penalty")) return e;
  if (s.overlong_buffer_penalty < 0)
    return rl_error{rl_errc::invalid_setting, "reward_shaping.overlong_buffer_penalty is " +
                                                  format_number(s.overlong_buffer_penalty) + ", below 0"};
  return std::nullopt;
}

rl_result<std::vector<double>> scale_rewards(const reward_scaling& s, std::span<const double> raw_rewards) {
  if (auto e = check_finite(raw_rewards, "raw_rewards")) return *e;
  std::vector<double> out(raw_rewards.begin(), raw_rewards.end());
  if (!s.enabled) return out;
  if (auto e = check_settings(s)) return *e;
  const double source_span = s.source_max - s.source_min;
  const double target_span = s.target_max - s.target_min;
  for (double& r : out) {
    const double clamped = std::clamp(r, s.source_min, s.source_max);
    r = s.target_min + (clamped - s.source_min) / source_span * target_span;
  }
  return out;
}

rl_result<std::vector<double>> shape_overlong(const overlong_shaping& s, std::span<const double> rewards,
                                              std::span<const std::int64_t> response_lengths) {
  if (auto e = check_same_size("response_lengths", response_lengths.size(), "rewards", rewards.size())) return *e;
  if (auto e = check_finite(rewards, "rewards")) return *e;
  if (auto e = check_not_negative(response_lengths, "response_lengths")) return *e;
  std::vector<double> out(rewards.begin(), rewards.end());
  if (!s.enabled) return out;
  if (auto e = check_settings(s)) return *e;
  const double expected = static_cast<double>(s.max_response_length - s.overlong_buffer_length);
  const double buffer = static_cast<double>(s.overlong_buffer_length);
  for (std::size_t i = 0; i < out.size(); ++i) {
    const double over = static_cast<double>(response_lengths[i]) - expected;
    out[i] += std::min(-over / buffer * s.overlong_buffer_penalty, 0.0);
  }
  return out;
}

rl_result<processed_rewards> process_rewards(const reward_scaling& scaling, const overlong_shaping& shaping,
                                             std::span<const sample_outcome> samples) {
  std::vector<double> raw;
  std::vector<std::int64_t> lengths;
  raw.reserve(samples.size());
  lengths.reserve(samples.size());
  for (const auto& s : samples) {
    raw.push_back(s.raw_reward);
    lengths.push_back(s.response_length);
  }
  auto scaled = scale_rewards(scaling, raw);
  if (!scaled) return scaled.error();
  auto shaped = shape_overlong(shaping, *scaled, lengths);
  if (!shaped) return shaped.error();
  return processed_rewards{std::move(*scaled), std::move(*shaped)};
}

}  // namespace tandem::rl
