// The unbiased pass@k estimator (pass_at_k.h).
#include "orchestration/rl/pass_at_k.h"

#include <string>
#include <vector>

#include "orchestration/rl/input_checks.h"

namespace tandem::rl {

rl_result<double> pass_at_k(std::int64_t n, std::int64_t c, std::int64_t k) {
  if (n < 1) return rl_error{rl_errc::invalid_input, "pass@k of " + std::to_string(n) + " samples"};
  if (c < 0 || c > n)
    return rl_error{rl_errc::invalid_input, "pass@k: " + std::to_string(c) + " correct is outside [0, " +
                                                std::to_string(n) + "]"};
  if (k < 1 || k > n)
    return rl_error{rl_errc::invalid_input, "pass@k: k = " + std::to_string(k) + " is outside [1, " +
                                                std::to_string(n) + "]"};
  if (n - c < k) return 1.0;  // every draw of k holds a correct sample
  double none_correct = 1.0;  // C(n-c, k) / C(n, k)
  for (std::int64_t i = n - c + 1; i <= n; ++i) none_correct *= 1.0 - static_cast<double>(k) / static_cast<double>(i);
  return 1.0 - none_correct;
}

rl_result<double> mean_pass_at_k(std::span<const std::int64_t> groups, std::int64_t group_count,
                                 std::span<const double> raw_rewards, std::int64_t k) {
  if (auto e = check_same_size("groups", groups.size(), "raw_rewards", raw_rewards.size())) return *e;
  if (auto e = check_groups(groups, group_count, "groups")) return *e;
  if (auto e = check_finite(raw_rewards, "raw_rewards")) return *e;
  if (group_count < 1) return rl_error{rl_errc::invalid_input, "pass@k over no groups"};
  std::vector<std::int64_t> n(static_cast<std::size_t>(group_count), 0), c(n);
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const auto g = static_cast<std::size_t>(groups[i]);
    ++n[g];
    if (raw_rewards[i] > 0) ++c[g];
  }
  double sum = 0;
  for (std::size_t g = 0; g < n.size(); ++g) {
    if (n[g] == 0) return rl_error{rl_errc::invalid_input, "pass@k: group " + std::to_string(g) + " has no samples"};
    if (n[g] < k)
      return rl_error{rl_errc::invalid_input, "pass@k: group " + std::to_string(g) + " has " + std::to_string(n[g]) +
                                                  " samples, fewer than k = " + std::to_string(k)};
    auto p = pass_at_k(n[g], c[g], k);
    if (!p) return p.error();
    sum += *p;
  }
  return sum / static_cast<double>(group_count);
}

}  // namespace tandem::rl
