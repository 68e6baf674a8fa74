// Element-wise arithmetic of the residual stream: sums of branches, scalar scales (the embedding
// projection's H^(-1/2)) and the per-layer layer_scalar, a tensor of one element. Tensors are
// viewed as [rows, cols].
#pragma once

#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"
#include "gpu/core/tensor.h"

namespace tandem::gpu::ops {

/// y = a + b. a, b, y F32 [rows, cols]; y may be a or b. Its backward passes dy to both inputs.
/// On failure y is unspecified.
status add_forward(const exec_context& ctx, const tensor& a, const tensor& b, const tensor& y);

/// y = x · s. x, y F32 [rows, cols]; y may be x. Its backward is scale_forward(dy, s).
/// On failure y is unspecified.
status scale_forward(const exec_context& ctx, const tensor& x, double s, const tensor& y);

/// y = x · s[0] with s F32 [1] (layer_scalar). x, y F32 [rows, cols]; y may be x.
/// On failure y is unspecified.
status scale_by_forward(const exec_context& ctx, const tensor& x, const tensor& s, const tensor& y);

/// dx = dy · s[0] (written; dx may be dy) and ds[0] += Σ dy ⊙ x (x: the forward's input), summed
/// in a fixed order. x, dy, dx F32 [rows, cols]; s, ds F32 [1]; dx or ds empty to skip it.
/// On failure dx and ds are unspecified.
status scale_by_backward(const exec_context& ctx, const tensor& x, const tensor& s, const tensor& dy, const tensor& dx, const tensor& ds);

}  // namespace tandem::gpu::ops
