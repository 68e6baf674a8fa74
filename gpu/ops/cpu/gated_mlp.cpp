// The gated GELU activation on the CPU, element-wise in the kernel's type.
#include "gpu/ops/cpu/gated_mlp.h"
#include "gpu/ops/cpu/parallel.h"

namespace tandem::gpu::ops::cpu {

template <class T>
void gelu_tanh_forward(const T* x, std::int64_t n, T* y) {
#pragma omp parallel for schedule(static) if (parallel_worth(n))
  for (std::int64_t i = 0; i < n; ++i) y[i] = gelu_tanh(x[i]);
}

template <class T>
void gelu_tanh_backward(const T* x, const T* dy, std::int64_t n, T* dx, bool accumulate) {
#pragma omp parallel for schedule(static) if (parallel_worth(n))
  for (std::int64_t i = 0; i < n; ++i) {
    const T g = gelu_tanh_derivative(x[i]) * dy[i];
    dx[i] = accumulate ? dx[i] + g : g;
  }
}

template <class T>
void gated_gelu_forward(const T* gate, const T* up, std::int64_t in_stride, std::int64_t rows, std::int64_t cols,
                        T* h) {
#pragma omp parallel for schedule(static) if (parallel_worth(rows * cols))
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* g = gate + r * in_stride;
    const T* u = up + r * in_stride;
    T* o = h + r * cols;
    for (std::int64_t j = 0; j < cols; ++j) o[j] = gelu_tanh(g[j]) * u[j];
  }
}

template <class T>
void gated_gelu_backward(const T* gate, const T* up, std::int64_t in_stride, const T* dh, std::int64_t rows,
                         std::int64_t cols, T* dgate, T* dup, std::int64_t grad_stride) {
#pragma omp parallel for schedule(static) if (parallel_worth(rows * cols))
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* g = gate + r * in_stride;
    const T* u = up + r * in_stride;
    const T* d = dh + r * cols;
    T* dg = dgate + r * grad_stride;
    T* du = dup + r * grad_stride;
    for (std::int64_t j = 0; j < cols; ++j) {
      const T gj = g[j], uj = u[j], dj = d[j];  // all read before either write
      dg[j] = dj * uj * gelu_tanh_derivative(gj);
      du[j] = dj * gelu_tanh(gj);
    }
  }
}

template void gelu_tanh_forward<float>(const float*, std::int64_t, float*);
template void gelu_tanh_forward<double>(const double*, std::int64_t, double*);
template void gelu_tanh_backward<float>(const float*, const float*, std::int64_t, float*, bool);
template void gelu_tanh_backward<double>(const double*, const double*, std::int64_t, double*, bool);
template void gated_gelu_forward<float>(const float*, const float*, std::int64_t, std::int64_t, std::int64_t, float*);
template void gated_gelu_forward<double>(const double*, const double*, std::int64_t, std::int64_t, std::int64_t,
                                         double*);
template void gated_gelu_backward<float>(const float*, const float*, std::int64_t, const float*, std::int64_t,
                                         std::int64_t, float*, float*, std::int64_t);
template void gated_gelu_backward<double>(const double*, const double*, std::int64_t, const double*, std::int64_t,
                                          std::int64_t, double*, double*, std::int64_t);

}  // namespace tandem::gpu::ops::cpu
