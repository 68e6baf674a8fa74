// Turning a step's trajectories into the policy's inputs: packed sequences for logprobs and
// training micro-batches (the advantages come from step_rewards.hpp) (DESIGN.md sections 4 and 9).
//
// Sequence s is prompt + generated tokens. Per token t of it: mask 1 on generated tokens (0 for a
// trajectory the loss leaves out), 0 on prompt tokens (token 0 is always a prompt token); advantage = the trajectory's advantage on
// every token; lp_gen = the generator's logprob on generated tokens, 0 elsewhere; lp_prev = the
// policy's logprob from logprobs().
#pragma once

#include <cstddef>
#include <vector>

#include "actors/api/messages.hpp"
#include "gpu/engine/train_engine.h"

namespace tandem {

/// Trajectories [begin, end) packed as prompt + generated tokens each.
gpu::packed_sequences pack_sequences(const std::vector<trajectory>& trajectories, std::size_t begin, std::size_t end);

/// Masked tokens and sequences with at least one masked token, over every trajectory.
/// `loss_multipliers` (one per trajectory, or empty: all 1): a trajectory with 0 has no masked token.
gpu::global_counts count_masked(const std::vector<trajectory>& trajectories, const std::vector<double>& loss_multipliers = {});

/// Micro-batches over trajectories [begin, end), cut by a token budget: trajectories go, in order,
/// into the current micro-batch while its tokens (prompt plus generated) stay within
/// `token_budget`; a trajectory longer than the budget gets a micro-batch of its own. So a
/// micro-batch's activations are bounded by tokens, and short sequences share one pass.
/// `lp_prev` holds the policy's logprobs of every trajectory packed in order
/// (pack_sequences(trajectories, 0, size)); `advantages` has one value per trajectory, and so has
/// `loss_multipliers` (or is empty: all 1): a generated token's mask is its trajectory's multiplier.
std::vector<gpu::train_micro_batch_data> make_micro_batches(const std::vector<trajectory>& trajectories,
                                                            const std::vector<double>& advantages,
                                                            const std::vector<float>& lp_prev, std::size_t begin,
                                                            std::size_t end, std::int64_t token_budget,
                                                            const std::vector<double>& loss_multipliers = {});

/// The sequences of `n` split over `parts` ranks: part r is [n * r / parts, n * (r + 1) / parts).
std::size_t shard_begin(std::size_t n, std::size_t parts, std::size_t r);

}  // namespace tandem
