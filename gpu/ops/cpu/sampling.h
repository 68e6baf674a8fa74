// CPU kernel of sampling (gpu/ops/sampling.h): rows in parallel (OpenMP), one row's scratch per
// thread, each row filtered by token_filter.h exactly as the scorer filters it.
#pragma once

#include <cstdint>

#include "gpu/core/philox.h"
#include "gpu/ops/logprobs.h"

namespace tandem::gpu::ops::cpu {

/// tokens [rows] and logprobs [rows] from logits [rows, v], one coordinate per row. Returns -1,
/// or the first row holding a non-finite logit.
template <class T>
std::int64_t sampling_forward(const T* logits, std::int64_t rows, std::int64_t v, const sampling_params& params,
                              const rng_coordinates* coordinates, std::int32_t* tokens, T* logprobs);

}  // namespace tandem::gpu::ops::cpu
