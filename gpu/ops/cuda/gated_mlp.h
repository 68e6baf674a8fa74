// CUDA kernels of the gated GELU activation (gpu/ops/gated_mlp.h), float32 or bfloat16 storage
// (`storage`), float32 arithmetic with the accurate tanhf; bfloat16 storage rounds each output
// once (gelu_tanh(g) · u is one rounding, not HF's two). The caller has checked every argument; the
// work is enqueued on the context's stream.
#pragma once

#include "gpu/core/dtype.h"
#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"
#include "gpu/core/tensor.h"

namespace tandem::gpu::ops::cuda {

/// y = gelu_tanh(x). x, y [rows, cols] (storage); y may be x.
status gelu_tanh_forward(const exec_context& ctx, dtype storage, const tensor& x, const tensor& y);

/// dx (= or +=) gelu_tanh'(x) · dy. x, dy, dx [rows, cols] (storage); dx may be dy when not
/// accumulating.
status gelu_tanh_backward(const exec_context& ctx, dtype storage, const tensor& x, const tensor& dy, const tensor& dx,
                          bool accumulate_dx);

/// h = gelu_tanh(gate) ⊙ up. gate, up, h [N, I] (storage).
status gated_gelu_forward(const exec_context& ctx, dtype storage, const tensor& gate, const tensor& up,
                          const tensor& h);

/// dgate = dh ⊙ up ⊙ gelu_tanh'(gate), dup = dh ⊙ gelu_tanh(gate), written. All [N, I] (storage).
status gated_gelu_backward(const exec_context& ctx, dtype storage, const tensor& gate, const tensor& up,
                           const tensor& dh, const tensor& dgate, const tensor& dup);

/// h [N, I] = gelu_tanh(g) ⊙ u, gate_up [N, 2I] = [g | u] (storage).
status gated_gelu_fused_forward(const exec_context& ctx, dtype storage, const tensor& gate_up, const tensor& h);

/// dgate_up [N, 2I] = [dgate | dup] (written) from gate_up [N, 2I] and dh [N, I] (storage).
status gated_gelu_fused_backward(const exec_context& ctx, dtype storage, const tensor& gate_up, const tensor& dh,
                                 const tensor& dgate_up);

}  // namespace tandem::gpu::ops::cuda
