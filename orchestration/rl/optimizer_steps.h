// How a GRPO step's samples become optimizer steps: when policy.train_global_batch_size is below
// the step's sample count, the samples (in batch order) split into consecutive global batches of
// that size, one optimizer step each; each global batch of n samples is sharded over the
// data-parallel ranks, rank r of `parts` taking [n*r/parts, n*(r+1)/parts) (sizes differ by at
// most one, the larger shards last).
#pragma once

#include <cstdint>
#include <vector>

#include "orchestration/rl/rl_error.h"

namespace tandem::rl {

/// Samples [begin, end) of the step's batch.
struct sample_range {
  std::int64_t begin = 0, end = 0;
  std::int64_t size() const { return end - begin; }
  bool operator==(const sample_range&) const = default;
};

/// One optimizer step's samples and each data-parallel rank's part of them (absolute indices).
struct global_batch {
  sample_range samples;
  std::vector<sample_range> rank_shards;  ///< one per data-parallel rank, in rank order
};

/// Rank r's part of n samples split `parts` ways: [n*r/parts, n*(r+1)/parts). Errors:
/// invalid_input (n < 0, parts < 1, r outside [0, parts)), count_overflow (n*parts past int64).
rl_result<sample_range> rank_shard(std::int64_t n, std::int64_t parts, std::int64_t r);

/// The step's optimizer steps, in order. Errors: invalid_input (a count below 1, more ranks than
/// samples in a global batch),
/// does_not_divide (step_samples is not a multiple of train_global_batch_size; the message names
/// both), count_overflow.
rl_result<std::vector<global_batch>> split_optimizer_steps(std::int64_t step_samples,
                                                           std::int64_t train_global_batch_size,
                                                           std::int64_t data_parallel_size);

}  // namespace tandem::rl
