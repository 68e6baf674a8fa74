// pass@k: the chance that at least one of k samples drawn without replacement from a prompt's n
// generations is correct, by the unbiased estimator of Chen et al. 2021 (Codex) that NeMo-RL's
// evaluation uses: pass@k = 1 - C(n - c, k) / C(n, k) for c correct of n, computed as
// 1 - prod_{i = n-c+1}^{n} (1 - k / i) (no large binomials), and 1 when n - c < k.
// With k = n it is 1 when any generation is correct: the fraction of prompts with a correct
// answer that NeMo-RL's GRPO validation reports as pass_k.
#pragma once

#include <cstdint>
#include <span>

#include "orchestration/rl/rl_error.h"

namespace tandem::rl {

/// pass@k of one prompt. Errors: invalid_input (n < 1, c outside [0, n], k outside [1, n]).
rl_result<double> pass_at_k(std::int64_t n, std::int64_t c, std::int64_t k);

/// The mean over prompt groups of pass@k, a sample counting as correct when its raw reward is
/// above 0. Errors: invalid_input (sizes differ, a group index out of range, an empty group, a
/// group smaller than k, a reward not finite).
rl_result<double> mean_pass_at_k(std::span<const std::int64_t> groups, std::int64_t group_count,
                                 std::span<const double> raw_rewards, std::int64_t k);

}  // namespace tandem::rl
