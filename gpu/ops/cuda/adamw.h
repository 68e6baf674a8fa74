// CUDA AdamW step (gpu/ops/adamw.h): one fused element-wise kernel over the whole tensor. What CUDA
// accepts: grad float32 or bfloat16 (`storage`, the dispatch dtype; a bfloat16 gradient is widened
// exactly); param, exp_avg and exp_avg_sq each float32
// or bfloat16; model_copy float32, bfloat16 or empty. Arithmetic is float32 in the header's order,
// each operation rounded as the CPU float32 path rounds it (no fused multiply-adds), with the
// scalars (1 - beta), (1 - beta^step) and (1 - lr * weight_decay) formed in double on the host, so
// the result equals the CPU float32 step bit for bit (where the host compiler does not contract
// into FMAs either, as the default x86-64 build does not). The caller has checked every argument; the
// work is enqueued on the context's stream.
#pragma once

#include "gpu/core/dtype.h"
#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"
#include "gpu/core/tensor.h"
#include "gpu/ops/adamw.h"

namespace tandem::gpu::ops::cuda {

/// param F32|BF16 [n] (updated), grad F32|BF16 [n], exp_avg F32|BF16 [n] and exp_avg_sq F32|BF16 [n]
/// (updated), model_copy F32|BF16 [n] (written) or empty; every operand contiguous.
status adamw_step(const exec_context& ctx, dtype storage, const tensor& param, const tensor& grad, const tensor& exp_avg,
                  const tensor& exp_avg_sq, const adamw_hyper& hyper, const tensor& model_copy);

}  // namespace tandem::gpu::ops::cuda
