// The matrix FLOPs of the Gemma 4 text stack: what "model TFLOP/s" counts in every benchmark.
#pragma once

#include <cstdint>

#include "gpu/model/config.h"
#include "gpu/model/layout.h"

namespace tandem::gpu {

/// Forward FLOPs of `sequences` packed sequences of `length` tokens each:
///   - 2 per weight of every projection per token: every matrix of the layout but the embedding
///     tables, plus the tied head (vocab × hidden); of the experts' matrices only top_k of
///     num_experts run per token;
///   - attention's Q·Kᵀ and P·V: 4 · keys · heads · head_dim per query, keys = position + 1 on
///     full layers and min(position + 1, sliding_window) on sliding layers.
/// A training step (forward, then the backward's input and weight gradients) is 3 times this.
double forward_flops(const model_config& c, const model_layout& layout, std::int64_t sequences, std::int64_t length);

}  // namespace tandem::gpu
