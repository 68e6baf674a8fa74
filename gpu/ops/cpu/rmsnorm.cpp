// RMSNorm on the CPU: the sum of squares accumulates in double; the rest follows the spec's order
// in the kernel's type (float: mean rounded to float, + eps, powf(·, −0.5), x · r, · w).
#include "gpu/ops/cpu/rmsnorm.h"

#include <algorithm>
#include <cmath>

#include "gpu/ops/cpu/parallel.h"

namespace tandem::gpu::ops::cpu {

template <class T>
void rmsnorm_forward(const T* x, const T* w, std::int64_t rows, std::int64_t d, T eps, T* y, T* inv_rms) {
#pragma omp parallel for schedule(static) if (parallel_worth(rows * d))
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * d;
    T* yr = y + r * d;
    double sum = 0;
    for (std::int64_t j = 0; j < d; ++j) sum += static_cast<double>(xr[j]) * static_cast<double>(xr[j]);
    const T mean_square = static_cast<T>(sum / static_cast<double>(d));
    const T inv = std::pow(mean_square + eps, T(-0.5));
    if (inv_rms) inv_rms[r] = inv;
    if (w) {
      for (std::int64_t j = 0; j < d; ++j) yr[j] = (xr[j] * inv) * w[j];
    } else {
      for (std::int64_t j = 0; j < d; ++j) yr[j] = xr[j] * inv;
    }
  }
}

template <class T>
void rmsnorm_backward(const T* x, const T* w, const T* inv_rms, const T* dy, std::int64_t rows, std::int64_t d, T* dx,
                      T* dw, bool accumulate_dx) {
  if (dw) {
    // Columns split across threads; each sums its rows in order, in double.
    constexpr std::int64_t block = 64;
    const std::int64_t blocks = (d + block - 1) / block;
#pragma omp parallel for schedule(static) if (parallel_worth(rows * d))
    for (std::int64_t b = 0; b < blocks; ++b) {
      const std::int64_t begin = b * block, end = std::min(d, begin + block);
      double acc[block] = {};
      for (std::int64_t r = 0; r < rows; ++r) {
        const double inv = static_cast<double>(inv_rms[r]);
        for (std::int64_t j = begin; j < end; ++j)
          acc[j - begin] += static_cast<double>(dy[r * d + j]) * static_cast<double>(x[r * d + j]) * inv;
      }
      for (std::int64_t j = begin; j < end; ++j) dw[j] += static_cast<T>(acc[j - begin]);
    }
  }
  if (!dx) return;
#pragma omp parallel for schedule(static) if (parallel_worth(rows * d))
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * d;
    const T* gr = dy + r * d;
    T* out = dx + r * d;
    const double inv = static_cast<double>(inv_rms[r]);
    double dot = 0;  // Σ dn · n
    for (std::int64_t j = 0; j < d; ++j) {
      const double dn = static_cast<double>(gr[j]) * (w ? static_cast<double>(w[j]) : 1.0);
      dot += dn * static_cast<double>(xr[j]) * inv;
    }
    const double mean_dot = dot / static_cast<double>(d);
    for (std::int64_t j = 0; j < d; ++j) {
      const double dn = static_cast<double>(gr[j]) * (w ? static_cast<double>(w[j]) : 1.0);
      const double g = inv * (dn - static_cast<double>(xr[j]) * inv * mean_dot);
      out[j] = accumulate_dx ? static_cast<T>(static_cast<double>(out[j]) + g) : static_cast<T>(g);
    }
  }
}

template void rmsnorm_forward<float>(const float*, const float*, std::int64_t, std::int64_t, float, float*, float*);
template void rmsnorm_forward<double>(const double*, const double*, std::int64_t, std::int64_t, double, double*,
                                      double*);
template void rmsnorm_backward<float>(const float*, const float*, const float*, const float*, std::int64_t,
                                      std::int64_t, float*, float*, bool);
template void rmsnorm_backward<double>(const double*, const double*, const double*, const double*, std::int64_t,
                                       std::int64_t, double*, double*, bool);

}  // namespace tandem::gpu::ops::cpu
