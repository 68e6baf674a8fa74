// Per-group baselines and stds, mean or leave-one-out (group_baseline.h). Each group is read in
// one pass for its moments; leave-one-out takes a sample out of them instead of revisiting the
// other samples, so the cost is linear in the batch.
#include "orchestration/rl/group_baseline.h"

#include <algorithm>
#include <cmath>

#include "orchestration/rl/input_checks.h"

namespace tandem::rl {

namespace {

/// The moments of one group's valid rewards: count, sum, mean, sum of squared deviations, and
/// the smallest and largest value with how often each occurs (to tell "all equal" exactly).
struct moments {
  std::int64_t n = 0;
  double sum = 0, mean = 0, m2 = 0;
  double min = 0, max = 0;
  std::int64_t min_count = 0, max_count = 0;

  bool all_equal() const { return min == max; }
};

moments moments_of(const std::vector<std::size_t>& members, std::span<const double> r,
                   std::span<const std::uint8_t> valid) {
  moments m;
  for (std::size_t i : members) {
    if (!valid.empty() && valid[i] == 0) continue;
    const double x = r[i];
    if (m.n == 0 || x < m.min) {
      m.min = x;
      m.min_count = 0;
    }
    if (m.n == 0 || x > m.max) {
      m.max = x;
      m.max_count = 0;
    }
    if (x == m.min) ++m.min_count;
    if (x == m.max) ++m.max_count;
    m.sum += x;
    ++m.n;
  }
  if (m.n == 0) return m;
  m.mean = m.all_equal() ? m.min : m.sum / static_cast<double>(m.n);
  for (std::size_t i : members) {
    if (!valid.empty() && valid[i] == 0) continue;
    const double d = r[i] - m.mean;
    m.m2 += d * d;
  }
  return m;
}

struct mean_and_std {
  double mean = 0, std = 0;
};

/// Mean and Bessel std of all the group's valid rewards.
mean_and_std of_all(const moments& m) {
  if (m.n < 2 || m.all_equal()) return {m.mean, 0.0};
  return {m.mean, std::sqrt(m.m2 / static_cast<double>(m.n - 1))};
}

/// Mean and Bessel std of the group's valid rewards without the valid sample of reward `x`.
mean_and_std of_others(const moments& m, double x) {
  const std::int64_t k = m.n - 1;  // the others
  // The others are all equal when the group is, or when x is the only sample of its value and
  // every other sample holds the one other value.
  const bool others_equal = m.all_equal() || (x == m.min && m.min_count == 1 && m.max_count == k) ||
                            (x == m.max && m.max_count == 1 && m.min_count == k);
  const double mean_rest = (m.sum - x) / static_cast<double>(k);
  if (others_equal) return {m.all_equal() ? m.min : (x == m.min ? m.max : m.min), 0.0};
  if (k < 2) return {mean_rest, 0.0};
  // Taking x out of a set: M2_rest = M2 - (x - mean_all) * (x - mean_rest).
  const double m2_rest = std::max(0.0, m.m2 - (x - m.mean) * (x - mean_rest));
  return {mean_rest, std::sqrt(m2_rest / static_cast<double>(k - 1))};
}

}  // namespace

rl_result<group_statistics> group_baseline_and_std(const group_rewards& in, baseline_kind kind) {
  const std::size_t n = in.baseline_rewards.size();
  const std::span<const double> std_rewards = in.std_rewards.empty() ? in.baseline_rewards : in.std_rewards;
  if (auto e = check_same_size("groups", in.groups.size(), "baseline_rewards", n)) return *e;
  if (auto e = check_same_size("std_rewards", std_rewards.size(), "baseline_rewards", n)) return *e;
  if (!in.valid.empty())
    if (auto e = check_same_size("valid", in.valid.size(), "baseline_rewards", n)) return *e;
  if (auto e = check_groups(in.groups, in.group_count, "groups")) return *e;
  if (auto e = check_finite(in.baseline_rewards, "baseline_rewards")) return *e;
  if (auto e = check_finite(std_rewards, "std_rewards")) return *e;

  std::vector<std::vector<std::size_t>> members(static_cast<std::size_t>(in.group_count));
  for (std::size_t i = 0; i < n; ++i) members[static_cast<std::size_t>(in.groups[i])].push_back(i);

  group_statistics out{std::vector<double>(n, 0.0), std::vector<double>(n, 0.0)};
  for (const auto& group : members) {
    if (group.empty()) continue;
    const moments b = moments_of(group, in.baseline_rewards, in.valid);
    const moments s = moments_of(group, std_rewards, in.valid);
    for (std::size_t i : group) {
      if (b.n <= 1) {  // nothing to compare with: advantage 0
        out.baseline[i] = in.baseline_rewards[i];
        out.std[i] = 0.0;
        continue;
      }
      const bool counts = in.valid.empty() || in.valid[i] != 0;
      if (kind == baseline_kind::leave_one_out && counts) {
        out.baseline[i] = of_others(b, in.baseline_rewards[i]).mean;
        out.std[i] = of_others(s, std_rewards[i]).std;
      } else {
        out.baseline[i] = of_all(b).mean;
        out.std[i] = of_all(s).std;
      }
    }
  }
  return out;
}

}  // namespace tandem::rl
