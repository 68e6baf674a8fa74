// CUDA kernels of packed causal attention (gpu/ops/attention.h), float32 or bfloat16 storage
// (`storage`), float32 arithmetic (no TF32); lse is float32 either way. Flash style: 16-row
// query tiles, keys streamed in tiles of 32 positions with an online softmax, tiles the causal
// mask or the window hide skipped; bfloat16 rounds the probabilities before P·V. The backward is
// deterministic without atomics: a pass recomputing D = dO·o, a kernel owning each 16-key tile's
// dK / dV rows (query heads of a kv head summed in order), and one owning each query tile's dQ.
// The caller has checked shapes, dtypes and devices; the work is enqueued on the context's stream.
//
// Not checked on CUDA: the VALUES of cu_seqlens (device data; reading them would need a sync in
// the training path). Malformed offsets give unspecified out / lse / gradients but no access
// outside the tensors. Head dims up to 512 (any d <= 512); larger ones are refused (unsupported).
//
// Tensor cores: bfloat16 storage at head dim 256 or 512 with 16-byte aligned tensors runs
// tensor-core kernels instead (bf16 operands, f32 accumulation): the forward on Hopper's
// warpgroup instructions (attention_wgmma_forward.cuh: blocks of 128 rows at d 256, 64 at d 512,
// key tiles at multiples of 64 or 32 positions), the backward on them too (dK/dV and dQ passes: a
// block a unit of work at d 256, a cluster of two blocks, a column half each, at d 512); exp2 softmax, P and dS rounded to bfloat16 as operands; still
// deterministic (no atomics, fixed summation orders). The paged forward runs the same forward
// kernel, so a paged row still gives the packed row's bits. Keys and values must be finite there
// (a masked key's value meets a zero probability in the product). A forward kernel whose
// pipeline lost a signal traps after 10 seconds (the launch fails) rather than hang the stream.
#pragma once

#include "gpu/core/dtype.h"
#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"
#include "gpu/core/tensor.h"
#include "gpu/ops/attention.h"

namespace tandem::gpu::ops::cuda {

/// q [T, H, d], k, v [T, G, d], out [T, H, d] (storage); cu_seqlens I32 [S + 1]; lse F32 [T, H].
/// Needs a workspace ((S + 1) int64 tile offsets).
status attention_forward(const exec_context& ctx, dtype storage, const tensor& q, const tensor& k, const tensor& v,
                         const tensor& cu_seqlens, const tensor& out, const tensor& lse,
                         const attention_options& options);

/// dq [T, H, d] (= or += per accumulate_dq), dk, dv [T, G, d] (+=) (storage) from dout [T, H, d]
/// and the forward's lse F32 [T, H]; out [T, H, d] (storage) the forward's output or empty: with
/// the tensor-core kernels a given out supplies D = dO·o (else D is recomputed in float32, and the
/// FFMA kernels always recompute it). Needs a workspace (3 (S + 1) int64 offsets, T·H floats of D;
/// the tensor-core kernels, when the key tiles x kv heads are few, also 2 · splits · T·G·d floats
/// of dK / dV partials, splits <= 16 and at most 512 MiB of them).
status attention_backward(const exec_context& ctx, dtype storage, const tensor& q, const tensor& k, const tensor& v,
                          const tensor& cu_seqlens, const tensor& lse, const tensor& dout, const tensor& dq,
                          const tensor& dk, const tensor& dv, const attention_options& options, bool accumulate_dq,
                          const tensor& out);

}  // namespace tandem::gpu::ops::cuda
