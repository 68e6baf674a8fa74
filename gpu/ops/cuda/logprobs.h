// CUDA kernels of scoring (gpu/ops/logprobs.h): logits float32 or bfloat16 (`storage`), float32
// arithmetic with sums in double; one block per row through the filter of token_filter.cuh, the
// code the CUDA sampler uses too. The caller has checked every argument it can see on the host;
// the work is enqueued on the context's stream and nothing synchronises.
//
// Dtypes: logprobs and entropy (one dtype for both) are the logits' dtype or float32;
// dlogprobs is the logits' dtype or float32; dlogits is the logits' dtype.
// Values the host cannot see without a synchronisation are not refused: a target outside [0, V)
// scores NaN (entropy is still computed) and its gradient row is NaN; a row holding a
// non-finite logit gets a NaN logprob and entropy and a NaN gradient row.
#pragma once

#include "gpu/core/dtype.h"
#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"
#include "gpu/core/tensor.h"
#include "gpu/ops/logprobs.h"

namespace tandem::gpu::ops::cuda {

/// logits [rows, V] (storage), targets I32 [rows], logprobs [rows], entropy [rows] or empty.
status logprobs_forward(const exec_context& ctx, dtype storage, const tensor& logits, const tensor& targets,
                        const sampling_params& params, const tensor& logprobs, const tensor& entropy);

/// dlogits [rows, V] (storage; = or += with accumulate) from dlogprobs [rows].
status logprobs_backward(const exec_context& ctx, dtype storage, const tensor& logits, const tensor& targets,
                         const sampling_params& params, const tensor& dlogprobs, const tensor& dlogits,
                         bool accumulate);

}  // namespace tandem::gpu::ops::cuda
