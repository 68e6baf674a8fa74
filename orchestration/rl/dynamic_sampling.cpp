// The dynamic-sampling cache of one GRPO step (dynamic_sampling.h).
#include "orchestration/rl/dynamic_sampling.h"

#include <map>
#include <string>
#include <utility>

#include "orchestration/rl/input_checks.h"

namespace tandem::rl {

const char* to_string(dynamic_sampling_state s) {
  switch (s) {
    case dynamic_sampling_state::collecting: return "collecting";
    case dynamic_sampling_state::full: return "full";
    case dynamic_sampling_state::taken: return "taken";
    case dynamic_sampling_state::exhausted: return "exhausted";
  }
  return "unknown";
}

rl_result<dynamic_sampling_cache> dynamic_sampling_cache::create(const dynamic_sampling_settings& s) {
  if (s.target_samples < 1)
    return rl_error{rl_errc::invalid_setting,
                    "dynamic sampling needs a target of at least 1 sample, got " + std::to_string(s.target_samples)};
  if (s.max_gen_batches < 1)
    return rl_error{rl_errc::invalid_setting,
                    "dynamic_sampling_max_gen_batches is " + std::to_string(s.max_gen_batches) + ", below 1"};
  return dynamic_sampling_cache(s);
}

rl_error dynamic_sampling_cache::out_of_rounds() const {
  return {rl_errc::out_of_rounds,
          "dynamic sampling ran out of rounds: after " + std::to_string(rounds_) +
              " generation rounds (dynamic_sampling_max_gen_batches = " + std::to_string(settings_.max_gen_batches) +
              ") it kept " + std::to_string(kept_.size()) + " samples of groups whose rewards differ, " +
              std::to_string(settings_.target_samples) + " are needed"};
}

std::optional<rl_error> dynamic_sampling_cache::add_round(std::span<const round_sample> samples) {
  switch (state_) {
    case dynamic_sampling_state::collecting: break;
    case dynamic_sampling_state::exhausted: return out_of_rounds();
    case dynamic_sampling_state::full:
      return rl_error{rl_errc::wrong_state, "dynamic sampling: the batch is already full; take it before adding"};
    case dynamic_sampling_state::taken:
      return rl_error{rl_errc::wrong_state, "dynamic sampling: the batch was already taken; this step is over"};
  }
  if (samples.empty())
    return rl_error{rl_errc::invalid_input, "dynamic sampling: round " + std::to_string(rounds_ + 1) +
                                                " holds no samples"};

  // The round's group ids, renumbered densely for the std over each group.
  std::map<std::int64_t, std::int64_t> dense;
  std::vector<std::int64_t> groups(samples.size());
  std::vector<double> rewards(samples.size());
  for (std::size_t i = 0; i < samples.size(); ++i) {
    if (samples[i].group < 0)
      return rl_error{rl_errc::invalid_input, "samples[" + std::to_string(i) + "].group is " +
                                                  std::to_string(samples[i].group) + ", below 0"};
    groups[i] = dense.emplace(samples[i].group, static_cast<std::int64_t>(dense.size())).first->second;
    rewards[i] = samples[i].unshaped_reward;
  }
  if (auto e = check_finite(rewards, "unshaped_rewards")) return *e;
  auto stats = group_baseline_and_std({groups, static_cast<std::int64_t>(dense.size()), rewards, {}, {}},
                                      settings_.kind);
  if (!stats) return stats.error();

  ++rounds_;
  for (std::size_t i = 0; i < samples.size(); ++i)
    if (stats->std[i] != 0.0) kept_.push_back({rounds_, samples[i].group, samples[i].payload});

  if (kept() >= settings_.target_samples) {
    state_ = dynamic_sampling_state::full;
    return std::nullopt;
  }
  if (rounds_ > settings_.max_gen_batches) {
    state_ = dynamic_sampling_state::exhausted;
    return out_of_rounds();
  }
  return std::nullopt;
}

rl_result<dynamic_sampling_batch> dynamic_sampling_cache::take() {
  switch (state_) {
    case dynamic_sampling_state::full: break;
    case dynamic_sampling_state::exhausted: return out_of_rounds();
    case dynamic_sampling_state::collecting:
      return rl_error{rl_errc::wrong_state, "dynamic sampling: the cache holds " + std::to_string(kept_.size()) +
                                                " of the " + std::to_string(settings_.target_samples) +
                                                " samples needed; add another round"};
    case dynamic_sampling_state::taken:
      return rl_error{rl_errc::wrong_state, "dynamic sampling: the batch was already taken"};
  }
  const auto target = static_cast<std::size_t>(settings_.target_samples);
  dynamic_sampling_batch out;
  out.metrics.num_gen_batches = rounds_;
  out.metrics.num_discarded_valid_samples = kept() - settings_.target_samples;
  std::map<std::pair<std::int64_t, std::int64_t>, std::int64_t> dense;  // (round, group id) -> batch group
  out.samples.reserve(target);
  for (std::size_t i = 0; i < target; ++i) {
    const entry& e = kept_[i];
    const auto g = dense.emplace(std::pair{e.round, e.group}, static_cast<std::int64_t>(dense.size())).first->second;
    out.samples.push_back({g, e.round, e.payload});
  }
  out.group_count = static_cast<std::int64_t>(dense.size());
  state_ = dynamic_sampling_state::taken;
  kept_.clear();
  return out;
}

}  // namespace tandem::rl
