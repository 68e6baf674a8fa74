// Final-logit softcapping (docs/gemma4.md §2.5): y = c · tanh(x / c), c = final_logit_softcapping (30 in every
// checkpoint), and its backward dx = dy · (1 − tanh²(x / c)).
#pragma once

#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"
#include "gpu/core/tensor.h"

namespace tandem::gpu::ops {

/// y = tanh(x / cap) · cap, in that order (÷, tanh, ×). x, y F32 [rows, cols]; y may be x (in
/// place); cap > 0. On failure y is unspecified.
status softcap_forward(const exec_context& ctx, const tensor& x, double cap, const tensor& y);

/// dx = dy · (1 − tanh²(x / cap)), written, from the forward's INPUT x. x, dy, dx F32 [rows, cols];
/// dx may be dy (in place); cap > 0. On failure dx is unspecified.
status softcap_backward(const exec_context& ctx, const tensor& x, double cap, const tensor& dy, const tensor& dx);

}  // namespace tandem::gpu::ops
