// Element-wise arithmetic on the CPU.
#include "gpu/ops/cpu/elementwise.h"

namespace tandem::gpu::ops::cpu {

template <class T>
void add_forward(const T* a, const T* b, std::int64_t n, T* y) {
#pragma omp parallel for schedule(static) if (n > 65536)
  for (std::int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

template <class T>
void scale_forward(const T* x, T s, std::int64_t n, T* y) {
#pragma omp parallel for schedule(static) if (n > 65536)
  for (std::int64_t i = 0; i < n; ++i) y[i] = x[i] * s;
}

template <class T>
double dot(const T* x, const T* dy, std::int64_t n) {
  double sum = 0;
  for (std::int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * static_cast<double>(dy[i]);
  return sum;
}

template void add_forward<float>(const float*, const float*, std::int64_t, float*);
template void add_forward<double>(const double*, const double*, std::int64_t, double*);
template void scale_forward<float>(const float*, float, std::int64_t, float*);
template void scale_forward<double>(const double*, double, std::int64_t, double*);
template double dot<float>(const float*, const float*, std::int64_t);
template double dot<double>(const double*, const double*, std::int64_t);

}  // namespace tandem::gpu::ops::cpu
