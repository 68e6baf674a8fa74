// CPU kernels of element-wise arithmetic (gpu/ops/elementwise.h); the caller has checked every
// argument.
#pragma once

#include <cstdint>

namespace tandem::gpu::ops::cpu {

/// y [n] = a + b.
template <class T>
void add_forward(const T* a, const T* b, std::int64_t n, T* y);

/// y [n] = x · s.
template <class T>
void scale_forward(const T* x, T s, std::int64_t n, T* y);

/// Σ dy ⊙ x over n elements, in double, in index order.
template <class T>
double dot(const T* x, const T* dy, std::int64_t n);

}  // namespace tandem::gpu::ops::cpu
