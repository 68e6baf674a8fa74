// The Gemma 4 mixture-of-experts block (26B-A4B; docs/gemma4.md §2.4.3, §5, §6.1.4):
// the router (scale-less RMSNorm, scale, projection, softmax, top-k, renormalisation, per-expert
// scale) and the experts (gated gelu_tanh MLP per expert, weighted sum over the K routed experts),
// each with its backward. The top-k choice is treated as constant in the backward.
//
// Every floating tensor of one call shares the dtype of the first input (float32 or float64 on the
// CPU, float32 or bfloat16 on CUDA), except the router's saved inv_rms, which is float32 next to
// bfloat16 (statistics_type, dispatch.h); indices are int32. On failure the outputs are unspecified
// and the inputs untouched. The CUDA backend's extra rules (a stream sync per experts call, top-k at
// most 3072) are in cuda/moe.h.
#pragma once

#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"
#include "gpu/core/tensor.h"

namespace tandem::gpu::ops {

/// Router forward on the residual stream x itself (not normed):
///   u = rmsnorm_noscale(x) * router_scale * H^(-1/2), logits = u · projᵀ,
///   p = softmax over all E (in the compute dtype), top-k by p (slots in descending probability; equal
///   probabilities go to the lower expert index), r_k = p_k / Σ_j p_j over the K selected,
///   weights[t, k] = r_k * per_expert_scale[indices[t, k]].
/// x                F32 [N, H]
/// router_scale     F32 [H]        router.scale
/// proj             F32 [E, H]     router.proj.weight
/// per_expert_scale F32 [E]
/// weights          F32 [N, K]     out, 1 <= K <= E
/// indices          I32 [N, K]     out, distinct experts per token
/// renormalized     F32 [N, K]     out, r_k (weights before per_expert_scale); empty to skip
/// inv_rms          F32 [N]        out, (mean(x²) + eps)^(-1/2); empty to skip
/// renormalized and inv_rms are what moe_router_backward needs.
status moe_router_forward(const exec_context& ctx, const tensor& x, const tensor& router_scale, const tensor& proj,
                          const tensor& per_expert_scale, const tensor& weights, const tensor& indices,
                          const tensor& renormalized, const tensor& inv_rms, double eps = 1e-6);

/// Router backward with the indices fixed. With g_k = per_expert_scale[e_k] * dweights_k:
///   dlogit[e_k] = r_k (g_k - Σ_j r_j g_j) on the selected experts (0 elsewhere),
///   d per_expert_scale[e] += Σ over (token, slot) routed to e of r_k * dweights_k,
///   then back through proj, router_scale, H^(-1/2) and the scale-less RMSNorm into x.
/// x, router_scale, proj, per_expert_scale: the forward's inputs; indices, renormalized, inv_rms: its
/// outputs. dweights F32 [N, K]. Outputs (empty to skip each):
/// dx                F32 [N, H]   written, or added to with accumulate_dx
/// dproj             F32 [E, H]   +=
/// drouter_scale     F32 [H]      +=
/// dper_expert_scale F32 [E]      +=
status moe_router_backward(const exec_context& ctx, const tensor& x, const tensor& router_scale, const tensor& proj,
                           const tensor& per_expert_scale, const tensor& indices, const tensor& renormalized,
                           const tensor& inv_rms, const tensor& dweights, const tensor& dx, const tensor& dproj,
                           const tensor& drouter_scale, const tensor& dper_expert_scale, bool accumulate_dx = false);

/// Experts forward: out[t] = Σ_k weights[t, k] * down[e] · (gelu_tanh(gate[e] · y[t]) ⊙ (up[e] · y[t]))
/// with e = indices[t, k], gate[e] = gate_up[e, :Im], up[e] = gate_up[e, Im:]. Tokens are grouped by
/// expert (one GEMM per expert over its routed tokens); each token's K weighted expert outputs are
/// added to it in ascending expert order (equal experts: ascending slot).
/// y        F32 [N, H]        pre_feedforward_layernorm_2 output
/// gate_up  F32 [E, 2*Im, H]  experts.gate_up_proj
/// down     F32 [E, H, Im]    experts.down_proj
/// weights  F32 [N, K]        routing weights (moe_router_forward's weights)
/// indices  I32 [N, K]        experts in [0, E); a token may list an expert twice (the terms add)
/// out      F32 [N, H]        written
status moe_experts_forward(const exec_context& ctx, const tensor& y, const tensor& gate_up, const tensor& down, const tensor& weights,
                           const tensor& indices, const tensor& out);

/// Tokens up to which moe_experts_forward may run in a captured_work (a decode step's): on the
/// CPU any call may; on CUDA a call of at most this many tokens makes no host wait while captured
/// (each expert's rows padded to a fixed count, the counts kept on the device: ops/cuda/moe_padded.cu).
/// That layout's scratch grows with E · N rows (E · N · (6 H + 12 Im) bytes in bfloat16: 1.5 GB
/// at 512 tokens of the 26B-A4B shape), which bounds it.
constexpr std::int64_t moe_capturable_tokens = 512;

/// Experts backward (recomputes the expert activations from y). dout F32 [N, H]. Outputs (empty to
/// skip each):
/// dy        F32 [N, H]        written, or added to with accumulate_dy
/// dgate_up  F32 [E, 2*Im, H]  +=
/// ddown     F32 [E, H, Im]    +=
/// dweights  F32 [N, K]        written (its one consumer is moe_router_backward)
status moe_experts_backward(const exec_context& ctx, const tensor& y, const tensor& gate_up, const tensor& down, const tensor& weights,
                            const tensor& indices, const tensor& dout, const tensor& dy, const tensor& dgate_up,
                            const tensor& ddown, const tensor& dweights, bool accumulate_dy = false);

}  // namespace tandem::gpu::ops
