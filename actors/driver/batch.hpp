// Turning a step's trajectories into the policy ranks' work (DESIGN.md sections 4 and 9): which
// trajectories each rank scores and trains on, the logprobs job that carries them to it once, and
// the masked-token counts that normalise each optimizer step's loss. The per-token loss inputs
// are built on the rank (actors/policy_worker/step_batch.hpp); only per-sequence values (an
// advantage and a loss multiplier each) follow in the train job.
//
// With policy.train_global_batch_size G below the step's N trajectories, the step takes N / G
// optimizer steps over consecutive global batches, each sharded over the R ranks
// (orchestration/rl/optimizer_steps.h). A rank's trajectories are its shards of every global
// batch, in order; its train job lists, per optimizer step, how many of them that step takes and
// the counts over the whole global batch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "actors/api/messages.hpp"
#include "gpu/engine/train_engine.h"
#include "orchestration/rl/optimizer_steps.h"

namespace tandem {

/// Trajectories `indices`, in that order, packed as prompt + generated tokens each.
gpu::packed_sequences pack_sequences(const std::vector<trajectory>& trajectories, const std::vector<std::size_t>& indices);

/// The trajectories of `rank` over every global batch of `plan`, in order.
std::vector<std::size_t> rank_trajectories(const std::vector<rl::global_batch>& plan, std::size_t rank);

/// The logprobs job of trajectories `indices` for step `step` at version `version`.
logprobs_job make_logprobs_job(std::uint32_t step, weight_version version, const std::vector<trajectory>& trajectories,
                               const std::vector<std::size_t>& indices, const gpu::ops::sampling_params& sampling,
                               bool reference);

/// Masked tokens and sequences with at least one masked token over trajectories [begin, end):
/// a trajectory's generated tokens, less its `excluded` ones (one count per trajectory, or
/// empty: none), count unless its loss multiplier is 0 (`loss_multipliers` one per trajectory,
/// or empty: all 1).
gpu::global_counts count_masked(const std::vector<trajectory>& trajectories, std::size_t begin, std::size_t end,
                                const std::vector<double>& loss_multipliers = {},
                                const std::vector<std::int32_t>& excluded = {});

/// The train job of `rank` (everything but the loss and sampling settings): its trajectories'
/// advantages and multipliers in rank_trajectories order, and one share per optimizer step.
train_job make_train_job(std::uint32_t step, weight_version version, const std::vector<rl::global_batch>& plan,
                         std::size_t rank, const std::vector<trajectory>& trajectories,
                         const std::vector<double>& advantages, const std::vector<double>& loss_multipliers,
                         const std::vector<std::int32_t>& excluded, std::int64_t micro_batch_tokens);

}  // namespace tandem
