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

}  // namespace tandem::gpu::ops
