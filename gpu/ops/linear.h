// Linear layers without bias (every Gemma 4 projection): y = x · wᵀ with Hugging Face's [out, in]
// weight layout, and its backward.
#pragma once

#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"
#include "gpu/core/tensor.h"

namespace tandem::gpu::ops {

/// y [N, out] = x [N, in] · wᵀ, w [out, in]; with `accumulate`, y += x · wᵀ.
status linear_forward(const exec_context& ctx, const tensor& x, const tensor& w, const tensor& y, bool accumulate = false);

/// dx [N, in] = dy [N, out] · w (+= with accumulate_dx); dw [out, in] += dyᵀ · x (weight
/// gradients always accumulate, so micro-batches sum). Pass an empty dx or dw to skip it.
status linear_backward(const exec_context& ctx, const tensor& x, const tensor& w, const tensor& dy, const tensor& dx, const tensor& dw,
                       bool accumulate_dx = false);

}  // namespace tandem::gpu::ops
