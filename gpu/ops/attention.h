// Causal self-attention over variable-length sequences packed end to end (docs/gemma4.md §2.3, §2.4.1
// steps 4-5), with optional sliding window and grouped-query heads, and its memory-efficient backward
// (§6.1 items 1 and 7). q, k and v arrive normed and rotated: this op does no RoPE and no norm.
//
// Packing: sequence s occupies tokens [cu_seqlens[s], cu_seqlens[s+1]); a token's position is its
// index minus its sequence's first token. Query position i of a sequence sees the keys j of the SAME
// sequence with j <= i, and with a sliding window W > 0 only j > i - W (exactly the W keys
// i-W+1..i, itself included). Query head h reads kv head h / (num_heads / num_kv_heads).
//
//   p_ij = softmax_j(scaling · q_i·k_j) over the visible j,   o_i = Σ_j p_ij v_j,
//   lse_i = log Σ_j exp(scaling · q_i·k_j)   (saved so the backward can recompute p without storing it).
//
// Keys and values have as many tokens as the queries (prefill / training). Decoding and chunked
// prefill read them from a paged KV cache instead (paged_attention.h), with the same per-row
// arithmetic, so a row gives the same bits either way.
//
// Precision (CPU reference): dot products and sums accumulate in double; the softmax's elements are
// computed in the compute dtype (float32, or float64 for the reference path).
#pragma once

#include <cstdint>

#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"
#include "gpu/core/tensor.h"

namespace tandem::gpu::ops {

/// How scores are formed and masked; shared by the forward and its backward, which must agree.
struct attention_options {
  double scaling = 1.0;             ///< multiplies q·k; Gemma 4 uses exactly 1.0 (the norms carry the temperature)
  std::int64_t sliding_window = 0;  ///< W > 0: query i sees keys i-W+1..i; 0: full causal attention
};

/// Forward. Shapes (T tokens, H query heads, G kv heads, d head_dim; H a multiple of G):
///   q          F32 [T, H, d]      queries (F64 for the reference path; k, v, out share q's dtype)
///   k          F32 [T, G, d]      keys
///   v          F32 [T, G, d]      values
///   cu_seqlens I32 [S + 1]        sequence offsets: 0 = cu[0] <= cu[1] <= ... <= cu[S] = T (empty sequences allowed)
///   out        F32 [T, H, d]      written
///   lse        F32 [T, H]         written: log-sum-exp of each query row's scaled scores (F64 when q is F64)
/// On failure out and lse are unspecified; the inputs are untouched.
status attention_forward(const exec_context& ctx, const tensor& q, const tensor& k, const tensor& v, const tensor& cu_seqlens, const tensor& out,
                         const tensor& lse, const attention_options& options = {});

/// Backward of attention_forward with the same q, k, v, cu_seqlens and options, and the lse it
/// returned; the probabilities are recomputed one query row at a time (no [T, T] matrix).
///   dout F32 [T, H, d]   gradient of the loss with respect to out
///   dq   F32 [T, H, d]   written, or accumulated (+=) with accumulate_dq
///   dk   F32 [T, G, d]   ACCUMULATED (+=): a k shared by several layers sums its consumers' gradients
///   dv   F32 [T, G, d]   ACCUMULATED (+=), likewise
///   out  F32 [T, H, d]   optional (a default tensor{}: none): the forward's output, q's dtype and shape; when
///                        given, the backward's row term D_i = dO_i · o_i comes from it instead of
///                        a recomputation of the forward. The CPU path ignores it (it always
///                        recomputes); CUDA uses it on its tensor-core path (bfloat16, d 256 / 512).
/// lse is treated as a saved intermediate, not an output: no gradient flows into it. Gradients of
/// query heads sharing a kv head are summed into that kv head. On failure dq, dk and dv
/// are unspecified; the inputs are untouched.
status attention_backward(const exec_context& ctx, const tensor& q, const tensor& k, const tensor& v, const tensor& cu_seqlens,
                          const tensor& lse, const tensor& dout, const tensor& dq, const tensor& dk, const tensor& dv,
                          const attention_options& options = {}, bool accumulate_dq = false, const tensor& out = tensor{});

}  // namespace tandem::gpu::ops
