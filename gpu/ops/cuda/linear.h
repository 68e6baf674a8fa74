// CUDA linear layers (gpu/ops/linear.h) through cuBLASLt (cublaslt_gemm.h): float32 or bfloat16
// storage (`storage`), true float32 compute and accumulation, one rounding on store. The caller has
// checked every argument; the work is enqueued on the context's stream, with gemm_workspace_bytes
// of scratch from the context's workspace.
#pragma once

#include "gpu/core/dtype.h"
#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"
#include "gpu/core/tensor.h"

namespace tandem::gpu::ops::cuda {

/// x [N, in], w [out, in], y [N, out] (all storage): y = x · wᵀ, or y += x · wᵀ with accumulate.
status linear_forward(const exec_context& ctx, dtype storage, const tensor& x, const tensor& w, const tensor& y,
                      bool accumulate);

/// dy [N, out]; dx [N, in] (= or += with accumulate_dx) or empty; dw [out, in] (+=) or empty.
status linear_backward(const exec_context& ctx, dtype storage, const tensor& x, const tensor& w, const tensor& dy,
                       const tensor& dx, const tensor& dw, bool accumulate_dx);

}  // namespace tandem::gpu::ops::cuda
