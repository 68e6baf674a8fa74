// A step's rewards and advantages (step_rewards.hpp).
#include "actors/driver/step_rewards.hpp"

#include "orchestration/rl/overlong_filtering.h"
#include "orchestration/rl/sample_outcome.h"

namespace tandem {

rl::rl_result<step_rewards> compute_step_rewards(const std::vector<trajectory>& trajectories, const std::vector<double>& raw,
                                                 std::int64_t prompts, const step_reward_settings& s) {
  std::vector<std::int64_t> groups;
  for (const auto& t : trajectories) groups.push_back(t.prompt_index);
  return compute_step_rewards(trajectories, raw, groups, prompts, s);
}

rl::rl_result<step_rewards> compute_step_rewards(const std::vector<trajectory>& trajectories, const std::vector<double>& raw,
                                                 const std::vector<std::int64_t>& groups, std::int64_t group_count,
                                                 const step_reward_settings& s) {
  if (raw.size() != trajectories.size() || groups.size() != trajectories.size())
    return rl::rl_error{rl::rl_errc::invalid_input, std::to_string(raw.size()) + " rewards and " +
                                                        std::to_string(groups.size()) + " groups for " +
                                                        std::to_string(trajectories.size()) + " trajectories"};
  std::vector<rl::sample_outcome> samples(trajectories.size());
  for (std::size_t i = 0; i < trajectories.size(); ++i) {
    const auto& t = trajectories[i];
    samples[i] = {raw[i], static_cast<std::int64_t>(t.tokens.size()), t.reason == gpu::finish_reason::length};
  }
  auto processed = rl::process_rewards(s.scaling, s.shaping, samples);
  if (!processed) return processed.error();
  rl::group_rewards g;
  g.groups = groups;
  g.group_count = group_count;
  g.baseline_rewards = processed->total;
  g.std_rewards = processed->unshaped;
  auto stats = rl::group_baseline_and_std(g, s.baseline);
  if (!stats) return stats.error();
  auto advantages = rl::compute_advantages(processed->total, *stats, s.advantages);
  if (!advantages) return advantages.error();
  step_rewards out;
  out.raw = raw;
  out.unshaped = std::move(processed->unshaped);
  out.total = std::move(processed->total);
  out.advantages = std::move(*advantages);
  out.loss_multipliers = rl::overlong_loss_multipliers(s.overlong_filtering, samples);
  for (const double m : out.loss_multipliers) out.filtered += m == 0.0 ? 1 : 0;
  return out;
}

}  // namespace tandem
