// The parity task (env.name parity, data.train_dataset null): a synthetic prompt set over a model's
// vocabulary and the parity reward. It is what both engines train on until datasets exist: the fake
// engines over their 64-token vocabulary, the Gemma 4 engines over their checkpoint's. Both
// functions are pure, so a test recomputes any prompt or reward a run recorded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace tandem::gpu {

/// `count` prompts of 3 to 8 tokens in [lowest, vocab), a pure function of `seed`; a prompt set
/// of fewer prompts is the start of a larger one. An empty range (vocab <= lowest) gives only the
/// token `lowest`. `lowest` keeps a model's special ids (padding, end of sequence, ...) out of
/// the prompts.
std::vector<std::vector<std::int32_t>> parity_prompts(std::uint64_t seed, std::size_t count, std::int32_t vocab,
                                                      std::int32_t lowest = 2);

/// The parity reward of one response (single-turn, deterministic): 1 when the last generated token
/// is even, 0 when it is odd or nothing was generated.
double parity_reward(std::span<const std::int32_t> generated);

}  // namespace tandem::gpu
