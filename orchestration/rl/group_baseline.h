// The baseline and reward std of each sample's prompt group, as NeMo-RL computes them for GRPO.
// A group is the samples of one prompt (a group index per sample). Over the group's n valid
// samples:
//   mean:          b_i = mean of the n rewards;  std_i = Bessel std of the n rewards
//                  (sqrt(sum (r - mean)^2 / (n - 1)));
//   leave_one_out: b_i = mean of the other n - 1 rewards;  std_i = Bessel std of those n - 1
//                  (0 when they are fewer than 2): RLOO, arXiv 2402.14740.
// A group with at most one valid sample gets b_i = its own reward and std 0 (advantage 0).
// The baseline and the std may come from different rewards: with DAPO overlong shaping the
// baseline averages the shaped ("total") reward and the std spreads the unshaped one, so dynamic
// sampling keeps groups whose correctness differs, not only their lengths.
// An invalid sample (valid[i] == 0) adds to no baseline or std; its own baseline and std are those
// of the group's valid samples (the mean kind's, under leave_one_out too, since it is not one of
// them). NeMo-RL's GRPO driver marks every sample valid.
// When the rewards a baseline or std is taken over are all equal, the baseline is exactly that
// reward and the std exactly 0 (so "std != 0" does not depend on rounding).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "orchestration/rl/rl_error.h"

namespace tandem::rl {

enum class baseline_kind { mean, leave_one_out };

/// The rewards of a batch, grouped by prompt; every span has one entry per sample (or is empty
/// where that is allowed).
struct group_rewards {
  std::span<const std::int64_t> groups;      ///< group index of each sample, in [0, group_count)
  std::int64_t group_count = 0;
  std::span<const double> baseline_rewards;  ///< what the baseline averages (the total reward)
  std::span<const double> std_rewards;       ///< what the std spreads (unshaped); empty: baseline_rewards
  std::span<const std::uint8_t> valid;       ///< nonzero: the sample counts; empty: every sample counts
};

/// Per sample, its group's baseline and std.
struct group_statistics {
  std::vector<double> baseline;
  std::vector<double> std;
};

/// Errors: invalid_input (sizes differ, a group index outside [0, group_count), a reward not finite).
rl_result<group_statistics> group_baseline_and_std(const group_rewards& in, baseline_kind kind);

}  // namespace tandem::rl
