// The gated activation of Gemma 4's MLPs (docs/gemma4.md §2.4.2, §2.4.3): h = gelu_tanh(gate) ⊙ up, from two
// tensors (dense MLP) or one fused [N, 2I] tensor (MoE experts' gate_up_proj), and the plain
// tanh-approximation GELU (the per-layer-input gate). gelu_tanh(x) = 0.5·x·(1 + tanh(√(2/π)·(x +
// 0.044715·x³))), NOT the erf form. The projections around it are linear ops (linear.h).
#pragma once

#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"
#include "gpu/core/tensor.h"

namespace tandem::gpu::ops {

/// y = gelu_tanh(x), element-wise. x, y F32 [rows, cols]; y may be x (in place).
/// On failure y is unspecified.
status gelu_tanh_forward(const exec_context& ctx, const tensor& x, const tensor& y);

/// dx = gelu_tanh'(x) · dy, written or (accumulate_dx) added, with
/// gelu_tanh'(x) = 0.5·(1 + t) + 0.5·x·(1 − t²)·√(2/π)·(1 + 3·0.044715·x²),
/// t = tanh(√(2/π)·(x + 0.044715·x³)).
/// x, dy, dx F32 [rows, cols]; dx may be dy when not accumulating. On failure dx is unspecified.
status gelu_tanh_backward(const exec_context& ctx, const tensor& x, const tensor& dy, const tensor& dx, bool accumulate_dx = false);

/// h = gelu_tanh(gate) ⊙ up. gate, up, h F32 [N, I]. On failure h is unspecified.
status gated_gelu_forward(const exec_context& ctx, const tensor& gate, const tensor& up, const tensor& h);

/// dgate = dh ⊙ up ⊙ gelu_tanh'(gate), dup = dh ⊙ gelu_tanh(gate), both written.
/// gate, up, dh, dgate, dup F32 [N, I]. On failure dgate and dup are unspecified.
status gated_gelu_backward(const exec_context& ctx, const tensor& gate, const tensor& up, const tensor& dh, const tensor& dgate,
                           const tensor& dup);

/// h = gelu_tanh(g) ⊙ u with gate_up F32 [N, 2I] = [g | u] (first half gate, second half up, as
/// the experts' gate_up_proj produces it); h F32 [N, I]. On failure h is unspecified.
status gated_gelu_fused_forward(const exec_context& ctx, const tensor& gate_up, const tensor& h);

/// dgate_up F32 [N, 2I] = [dgate | dup] (written) from gate_up F32 [N, 2I] and dh F32 [N, I].
/// On failure dgate_up is unspecified.
status gated_gelu_fused_backward(const exec_context& ctx, const tensor& gate_up, const tensor& dh, const tensor& dgate_up);

}  // namespace tandem::gpu::ops
