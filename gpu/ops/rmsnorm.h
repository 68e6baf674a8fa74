// RMSNorm over the last dimension, with a weight (used directly, no 1 + w) or scale-less, and its
// backward. Per-head norms (q_norm, k_norm, v_norm) view [tokens, heads, d] as [tokens·heads, d].
#pragma once

#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"
#include "gpu/core/tensor.h"

namespace tandem::gpu::ops {

/// y = x · (mean(x², last dim) + eps)^(−1/2) · w, row by row (docs/gemma4.md §2.0: the mean of squares,
/// plus eps, then pow −0.5, times the weight used directly).
///   x        F32 [rows, d]
///   w        F32 [d], or an empty tensor for the scale-less norm (v_norm, router norm)
///   y        F32 [rows, d]; may be x itself (in place)
///   inv_rms  F32 [rows]: the per-row (mean(x²) + eps)^(−1/2), saved for the backward; an empty
///            tensor skips it
/// On failure the outputs are unspecified; the inputs are untouched.
status rmsnorm_forward(const exec_context& ctx, const tensor& x, const tensor& w, double eps, const tensor& y, const tensor& inv_rms = {});

/// With n = x · inv_rms and dn = dy · w (dy for the scale-less norm):
///   dx = inv_rms · (dn − n · mean(dn · n)), written, or added with accumulate_dx (the residual
///   stream has several consumers);  dw += Σ_rows dy · n (weight gradients always accumulate).
///   x F32 [rows, d], w F32 [d] or empty, inv_rms F32 [rows] from the forward, dy F32 [rows, d],
///   dx F32 [rows, d] or empty to skip, dw F32 [d] or empty to skip (must be empty when w is).
/// On failure dx and dw are unspecified; the inputs are untouched.
status rmsnorm_backward(const exec_context& ctx, const tensor& x, const tensor& w, const tensor& inv_rms, const tensor& dy, const tensor& dx,
                        const tensor& dw, bool accumulate_dx = false);

/// y = rope(rmsnorm(x)·w) per head: a per-head norm then RoPE's rotation (q_norm or k_norm, then
/// the position's rotation), one pass over each (token, head) row, with the bits of
/// rmsnorm_forward then rope_forward (the normed row rounded to the storage type before it turns).
///   x F32 [tokens, heads, d], d even;  w F32 [d];  cos, sin F32 [tokens, d] (rope_tables' rows);
///   y F32 [tokens, heads, d], may be x (in place);  inv_rms F32 [tokens · heads] or empty.
/// The backward is theirs: rope_backward, then rmsnorm_backward on the [tokens · heads, d] view.
/// On failure y and inv_rms are unspecified; the inputs are untouched (unless y is x).
status rmsnorm_rope_forward(const exec_context& ctx, const tensor& x, const tensor& w, double eps, const tensor& cos,
                            const tensor& sin, const tensor& y, const tensor& inv_rms = {});

/// The tensors of residual_norm_forward: a decoder layer's branch joining the residual stream.
struct residual_norm_io {
  tensor x;             ///< F32 [rows, d]: the branch entering its norm
  tensor w;             ///< F32 [d]: the branch norm's weight
  tensor residual;      ///< F32 [rows, d]: the stream the branch joins
  tensor out;           ///< F32 [rows, d]: written; may be residual itself (in place)
  tensor inv_rms;       ///< F32 [rows] or empty: the branch norm's, saved for the backward
  tensor branch;        ///< F32 [rows, d] or empty: rmsnorm(x)·w itself (a trace shows it)
  tensor scale;         ///< F32 [1] or empty: the stream's scalar after the sum
  tensor pre_scale;     ///< F32 [rows, d] with scale (the sum before it, for the backward), else empty
  tensor next_w;        ///< F32 [d] or empty: the weight of the norm that reads the new stream
  tensor next;          ///< F32 [rows, d] with next_w: rmsnorm(out)·next_w, else empty
  tensor next_inv_rms;  ///< F32 [rows] or empty (only with next_w): that norm's, for the backward
};

/// One pass over each row of what rmsnorm_forward, add_forward, scale_by_forward and
/// rmsnorm_forward give called in turn, bit for bit (the branch rounded to the storage type before
/// the add, the sum before the scale):
///   branch = rmsnorm(x)·w;  out = (residual + branch) · scale[0] (no scale: the sum itself);
///   next = rmsnorm(out)·next_w.
/// The backward is theirs: rmsnorm_backward for each norm, the residual's gradient passed through,
/// scale_by_backward for the scalar (gpu/model/layer.cpp composes them). One eps for both norms.
/// On failure the outputs are unspecified; the inputs are untouched (but residual when out is it).
status residual_norm_forward(const exec_context& ctx, const residual_norm_io& io, double eps);

}  // namespace tandem::gpu::ops
