// Logit softcapping on the CPU, element-wise in the kernel's type.
#include "gpu/ops/cpu/softcap.h"

#include <cmath>

#include "gpu/ops/cpu/parallel.h"

namespace tandem::gpu::ops::cpu {

template <class T>
void softcap_forward(const T* x, std::int64_t n, T cap, T* y) {
#pragma omp parallel for schedule(static) if (parallel_worth(n))
  for (std::int64_t i = 0; i < n; ++i) y[i] = std::tanh(x[i] / cap) * cap;
}

template <class T>
void softcap_backward(const T* x, const T* dy, std::int64_t n, T cap, T* dx) {
#pragma omp parallel for schedule(static) if (parallel_worth(n))
  for (std::int64_t i = 0; i < n; ++i) {
    const T t = std::tanh(x[i] / cap);
    dx[i] = dy[i] * (T(1) - t * t);
  }
}

template void softcap_forward<float>(const float*, std::int64_t, float, float*);
template void softcap_forward<double>(const double*, std::int64_t, double, double*);
template void softcap_backward<float>(const float*, const float*, std::int64_t, float, float*);
template void softcap_backward<double>(const double*, const double*, std::int64_t, double, double*);

}  // namespace tandem::gpu::ops::cpu
