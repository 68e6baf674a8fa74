// CUDA kernels of RMSNorm (gpu/ops/rmsnorm.h), float32 or bfloat16 storage (`storage`), float32
// arithmetic; inv_rms is float32 either way. The caller has checked every argument; the work is
// enqueued on the context's stream. dw is deterministic: per-chunk partial sums in scratch, added
// in chunk order, no atomics.
#pragma once

#include "gpu/core/dtype.h"
#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"
#include "gpu/core/tensor.h"
#include "gpu/ops/rmsnorm.h"

namespace tandem::gpu::ops::cuda {

/// x, y [rows, d] (storage), w [d] (storage) or empty, inv_rms F32 [rows] or empty.
status rmsnorm_forward(const exec_context& ctx, dtype storage, const tensor& x, const tensor& w, double eps, const tensor& y,
                       const tensor& inv_rms);

/// gpu/ops/rmsnorm.h's rmsnorm_rope_forward: one kernel where the rows take the forward's vector
/// path, else rmsnorm_forward then rope_forward.
status rmsnorm_rope_forward(const exec_context& ctx, dtype storage, const tensor& x, const tensor& w, double eps,
                            const tensor& cos, const tensor& sin, const tensor& y, const tensor& inv_rms);

/// gpu/ops/rmsnorm.h's residual_norm_forward: one kernel where the rows take the forward's vector
/// path (the same layout, so the same bits), else the ops in turn (the branch in a workspace when
/// io.branch is empty).
status residual_norm_forward(const exec_context& ctx, dtype storage, const residual_norm_io& io, double eps);

/// dx [rows, d] (= or +=) or empty, dw [d] (+=) or empty; needs a workspace when dw is given.
status rmsnorm_backward(const exec_context& ctx, dtype storage, const tensor& x, const tensor& w, const tensor& inv_rms,
                        const tensor& dy, const tensor& dx, const tensor& dw, bool accumulate_dx);

}  // namespace tandem::gpu::ops::cuda
