// CUDA kernels of the MoE block (gpu/ops/moe.h), float32 or bfloat16 storage (`storage`) for x, y,
// the parameters, weights, renormalized and the gradients; inv_rms is float32 either way
// (statistics_type); indices are int32. Arithmetic is float32. The caller has checked every shape
// and dtype; the work is enqueued on the context's stream, with scratch from its workspace.
// Deterministic: no atomics; every sum runs in a fixed order.
//
// Router: u = rmsnorm_noscale(x) · router_scale · H^(-1/2) in float32, the projection as a float32
// cuBLASLt GEMM (a bfloat16 proj is widened first), softmax and top-k in float32 with the CPU's
// order (descending probability, equal probabilities to the lower expert).
//
// Experts: the (token, slot) pairs are counting-sorted by expert on the device (ascending slot
// within an expert, as the CPU groups them), gathered, and each expert's rows go through cuBLASLt
// GEMMs (bfloat16 inputs with float32 results where a float32 elementwise step follows); each token
// then adds its K rows in ascending (expert, slot) order, one kernel per token, no scatter-add.
// The per-expert row counts are read back to the host to size the GEMMs: moe_experts_forward and
// moe_experts_backward make ONE small device-to-host copy and synchronise the context's stream,
// except the forward of a few tokens in a stream capture (ops::moe_capturable_tokens).
#pragma once

#include "gpu/core/dtype.h"
#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"
#include "gpu/core/tensor.h"

namespace tandem::gpu::ops::cuda {

/// x [N, H], router_scale [H], proj [E, H], per_expert_scale [E] (storage); weights [N, K]
/// (storage), indices I32 [N, K], renormalized [N, K] (storage) or empty, inv_rms F32 [N] or empty.
status moe_router_forward(const exec_context& ctx, dtype storage, const tensor& x, const tensor& router_scale,
                          const tensor& proj, const tensor& per_expert_scale, const tensor& weights,
                          const tensor& indices, const tensor& renormalized, const tensor& inv_rms, double eps);

/// The forward's inputs and indices I32 [N, K], renormalized [N, K], inv_rms F32 [N], dweights
/// [N, K]; dx [N, H] (= or +=), dproj [E, H], drouter_scale [H], dper_expert_scale [E] (+=), each
/// possibly empty. A slot whose index lies outside [0, E) adds nothing (it cannot be refused
/// without a synchronisation; moe_router_forward never writes one).
status moe_router_backward(const exec_context& ctx, dtype storage, const tensor& x, const tensor& router_scale,
                           const tensor& proj, const tensor& per_expert_scale, const tensor& indices,
                           const tensor& renormalized, const tensor& inv_rms, const tensor& dweights, const tensor& dx,
                           const tensor& dproj, const tensor& drouter_scale, const tensor& dper_expert_scale,
                           bool accumulate_dx);

/// y [N, H], gate_up [E, 2 Im, H], down [E, H, Im], weights [N, K] (storage), indices I32 [N, K],
/// out [N, H] (written). An index outside [0, E) is refused (invalid_argument) before any output
/// is written: the check rides on the counts' read-back. Up to ops::moe_capturable_tokens tokens
/// the padded layout runs (moe_padded.cu), with the same bits per token; in a stream capture it makes no
/// host wait (the counts pick the pad on the device; its indices are then trusted as the router
/// wrote them: one outside [0, E) adds nothing), and its products' cuBLASLt choices must have
/// been made by an uncaptured call of the same shape.
status moe_experts_forward(const exec_context& ctx, dtype storage, const tensor& y, const tensor& gate_up,
                           const tensor& down, const tensor& weights, const tensor& indices, const tensor& out);

/// As the forward, with dout [N, H]; dy [N, H] (= or +=), dgate_up [E, 2 Im, H], ddown [E, H, Im]
/// (+=), dweights [N, K] (written), each possibly empty.
status moe_experts_backward(const exec_context& ctx, dtype storage, const tensor& y, const tensor& gate_up,
                            const tensor& down, const tensor& weights, const tensor& indices, const tensor& dout,
                            const tensor& dy, const tensor& dgate_up, const tensor& ddown, const tensor& dweights,
                            bool accumulate_dy);

}  // namespace tandem::gpu::ops::cuda
