// The MoE experts' forward over a padded layout (moe_padded.cu), which makes no host wait in a
// stream capture: moe_experts_forward (moe.h) takes it for up to ops::moe_capturable_tokens tokens.
#pragma once

#include "gpu/core/dtype.h"
#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"
#include "gpu/core/tensor.h"

namespace tandem::gpu::ops::cuda {

/// moe_experts_forward's contract (moe.h), for N >= 1 tokens on the context's current device:
/// true when it ran; false (nothing written) when, outside a stream capture, some expert has more
/// slots than there are tokens (tokens listing one expert twice, which the contract allows): no pad
/// holds those rows, and the caller takes the sorted layout instead (the same bits). In a capture
/// the experts of a token are trusted to be distinct, as the router gives them (rows of an expert
/// past N would add nothing).
result<bool> moe_padded_forward(const exec_context& ctx, dtype storage, const tensor& y, const tensor& gate_up,
                          const tensor& down, const tensor& weights, const tensor& indices, const tensor& out);

}  // namespace tandem::gpu::ops::cuda
