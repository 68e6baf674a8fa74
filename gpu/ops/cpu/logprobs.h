// CPU kernels of scoring (gpu/ops/logprobs.h): per-row target logprobs, entropy and the backward
// to the logits, over rows in parallel (OpenMP), one row's scratch per thread.
#pragma once

#include <cstdint>

#include "gpu/ops/logprobs.h"

namespace tandem::gpu::ops::cpu {

/// logprobs [rows], entropy [rows] or null, from logits [rows, v] and targets [rows] (checked to
/// lie in [0, v)). Returns -1, or the first row holding a non-finite logit.
template <class T>
std::int64_t logprobs_forward(const T* logits, const std::int32_t* targets, std::int64_t rows, std::int64_t v,
                              const sampling_params& params, T* logprobs, T* entropy);

/// dlogits [rows, v] (= or += with accumulate) from dlogprobs [rows]. Returns as the forward.
template <class T>
std::int64_t logprobs_backward(const T* logits, const std::int32_t* targets, const T* dlogprobs, std::int64_t rows,
                               std::int64_t v, const sampling_params& params, T* dlogits, bool accumulate);

}  // namespace tandem::gpu::ops::cpu
