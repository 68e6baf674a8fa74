// The task the fake engines are trained on (runtime.engine fake, env.name parity): their own prompt
// set and the parity reward. Both are pure functions, so a test recomputes any prompt or reward a
// run recorded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace tandem::gpu {

/// `count` prompts of 3 to 8 tokens in [2, vocab), a pure function of `seed` (for vocab > 2; a
/// smaller vocab gives only token 2).
std::vector<std::vector<std::int32_t>> fake_prompts(std::uint64_t seed, std::size_t count, std::int32_t vocab);

/// The parity reward of one response (single-turn, deterministic): 1 when the last generated token
/// is even, 0 when it is odd or nothing was generated.
double fake_parity_reward(std::span<const std::int32_t> generated);

}  // namespace tandem::gpu
