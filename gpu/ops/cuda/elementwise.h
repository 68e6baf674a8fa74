// CUDA kernels of element-wise arithmetic (gpu/ops/elementwise.h), float32 or bfloat16 storage
// (`storage`), float32 arithmetic; bfloat16 storage rounds each output once. The one-element scale
// s is read on the device (no host copy, no synchronisation). ds's sum Σ dy ⊙ x is taken in
// double, like the CPU reference, in a fixed order (per-block partial sums in scratch, then one
// block adds them by a fixed tree), so a call run twice gives the same bits. The caller has
// checked every argument; the work is enqueued on the context's stream.
#pragma once

#include "gpu/core/dtype.h"
#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"
#include "gpu/core/tensor.h"

namespace tandem::gpu::ops::cuda {

/// y = a + b. a, b, y [rows, cols] (storage); y may be a or b.
status add_forward(const exec_context& ctx, dtype storage, const tensor& a, const tensor& b, const tensor& y);

/// y = x · float(s). x, y [rows, cols] (storage); y may be x.
status scale_forward(const exec_context& ctx, dtype storage, const tensor& x, double s, const tensor& y);

/// y = x · s[0]. x, y [rows, cols] (storage), s [1] (storage); y may be x.
status scale_by_forward(const exec_context& ctx, dtype storage, const tensor& x, const tensor& s, const tensor& y);

/// ds[0] += float(Σ dy ⊙ x) (ds given; needs a workspace), then dx = dy · s[0] (dx given; dx may be
/// dy: the sum is enqueued first). x, dy, dx [rows, cols] (storage); s, ds [1] (storage).
status scale_by_backward(const exec_context& ctx, dtype storage, const tensor& x, const tensor& s, const tensor& dy,
                         const tensor& dx, const tensor& ds);

}  // namespace tandem::gpu::ops::cuda
