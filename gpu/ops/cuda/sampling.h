// CUDA kernel of sampling (gpu/ops/sampling.h): logits float32 or bfloat16 (`storage`), one block
// per row through the filter of token_filter.cuh, the code the CUDA scorer uses, so a sampled
// token's logprob is bit for bit what the CUDA logprobs_forward gives it (same dtype). The draw
// uses philox.h's uniform of each row's coordinates, computed on the device. The coordinates
// travel as the kernel's argument, coordinate_chunk rows per launch (a launch copies its
// arguments: no copy from host memory, nothing to wait for, the span may go once the call
// returns); nothing synchronises.
//
// Dtypes: logprobs is the logits' dtype or float32. A row holding a non-finite logit is not
// refused (the host cannot see it without a synchronisation): its token is -1 and its logprob NaN.
#pragma once

#include <span>

#include "gpu/core/dtype.h"
#include "gpu/core/exec_context.h"
#include "gpu/core/philox.h"
#include "gpu/core/status.h"
#include "gpu/core/tensor.h"
#include "gpu/ops/logprobs.h"

namespace tandem::gpu::ops::cuda {

/// logits [rows, V] (storage), coordinates: rows entries in host memory, or in the device's
/// (`on_device`: read by the kernel, so a captured launch reads new ones on every replay), tokens
/// I32 [rows], logprobs [rows]. Needs a workspace.
status sampling_forward(const exec_context& ctx, dtype storage, const tensor& logits, const sampling_params& params,
                        const rng_coordinates* coordinates, bool on_device, const tensor& tokens, const tensor& logprobs);

}  // namespace tandem::gpu::ops::cuda
