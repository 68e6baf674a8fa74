// CUDA kernels of the sums of squares by range (gpu/ops/sum_squares.h), float32 or bfloat16
// storage (`storage`), float64 arithmetic. The caller has checked every argument; the call waits
// for the context's stream to copy the sums back.
#pragma once

#include <span>

#include "gpu/core/dtype.h"
#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"
#include "gpu/core/tensor.h"
#include "gpu/ops/sum_squares.h"

namespace tandem::gpu::ops::cuda {

status sum_squares(const exec_context& ctx, dtype storage, const tensor& x, std::span<const element_range> ranges,
                   std::span<double> sums);

}  // namespace tandem::gpu::ops::cuda
