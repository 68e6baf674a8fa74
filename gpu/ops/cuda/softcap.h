// CUDA kernels of final-logit softcapping (gpu/ops/softcap.h), float32 or bfloat16 storage
// (`storage`), float32 arithmetic with the accurate tanhf (no fast-math approximation); bfloat16
// storage rounds each output once. The caller has checked every argument; the work is enqueued
// on the context's stream.
#pragma once

#include "gpu/core/dtype.h"
#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"
#include "gpu/core/tensor.h"

namespace tandem::gpu::ops::cuda {

/// y = tanh(x / cap) · cap. x, y [rows, cols] (storage); y may be x.
status softcap_forward(const exec_context& ctx, dtype storage, const tensor& x, double cap, const tensor& y);

/// dx = dy · (1 − tanh²(x / cap)). x, dy, dx [rows, cols] (storage); dx may be dy.
status softcap_backward(const exec_context& ctx, dtype storage, const tensor& x, double cap, const tensor& dy,
                        const tensor& dx);

}  // namespace tandem::gpu::ops::cuda
