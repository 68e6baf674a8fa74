// Linear layers without bias (every Gemma 4 projection): y = x · wᵀ with Hugging Face's [out, in]
// weight layout, and its backward.
#pragma once

#include <string>
#include <vector>

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

/// The algorithms the CUDA backend chose for token-row products of few rows (a decode step's), in
/// the order chosen, one line each: the shape, the row bucket, the candidates probed and those
/// giving the row-invariant bits, the kept algorithm and its time beside the row-invariant one's.
/// Empty without the CUDA backend or before such a product ran (the CPU has one algorithm).
std::vector<std::string> linear_algorithm_choices();

}  // namespace tandem::gpu::ops
