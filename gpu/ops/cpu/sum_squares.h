// CPU kernel of the sums of squares by range (gpu/ops/sum_squares.h); the caller has checked
// every argument.
#pragma once

#include <span>

#include "gpu/ops/sum_squares.h"

namespace tandem::gpu::ops::cpu {

/// sums[r] = Σ double(x[k]) · double(x[k]) over range r, in index order.
template <class T>
void sum_squares(const T* x, std::span<const element_range> ranges, std::span<double> sums);

}  // namespace tandem::gpu::ops::cpu
