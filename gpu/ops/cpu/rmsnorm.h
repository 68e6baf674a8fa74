// CPU kernels of RMSNorm (gpu/ops/rmsnorm.h); the caller has checked every argument.
#pragma once

#include <cstdint>

namespace tandem::gpu::ops::cpu {

/// y [rows, d] = x · (mean(x²) + eps)^(−1/2) · w; w and inv_rms [rows] may be null.
template <class T>
void rmsnorm_forward(const T* x, const T* w, std::int64_t rows, std::int64_t d, T eps, T* y, T* inv_rms);

/// dx [rows, d] (= or +=) and dw [d] (+=), either null to skip; w may be null (scale-less).
template <class T>
void rmsnorm_backward(const T* x, const T* w, const T* inv_rms, const T* dy, std::int64_t rows, std::int64_t d, T* dx,
                      T* dw, bool accumulate_dx);

}  // namespace tandem::gpu::ops::cpu
