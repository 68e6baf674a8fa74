// The PLE combination and layer gate on the CPU, element-wise in the kernel's type.
#include "gpu/ops/cpu/per_layer_input.h"

#include "gpu/ops/cpu/gated_mlp.h"
#include "gpu/ops/cpu/parallel.h"

namespace tandem::gpu::ops::cpu {
namespace {

// 2^(−1/2), a Python float in the model, applied in the activation's type.
template <class T>
constexpr T inv_sqrt2 = static_cast<T>(0.70710678118654752440);

}  // namespace

template <class T>
void ple_combine_forward(const T* c, const T* t, std::int64_t n, T* ple) {
#pragma omp parallel for schedule(static) if (parallel_worth(n))
  for (std::int64_t i = 0; i < n; ++i) ple[i] = (c[i] + t[i]) * inv_sqrt2<T>;
}

template <class T>
void ple_combine_backward(const T* dple, std::int64_t n, T* dc, T* dt) {
#pragma omp parallel for schedule(static) if (parallel_worth(n))
  for (std::int64_t i = 0; i < n; ++i) {
    const T g = dple[i] * inv_sqrt2<T>;
    if (dc) dc[i] = g;
    if (dt) dt[i] = g;
  }
}

template <class T>
void ple_gate_forward(const T* a, const T* ple_l, std::int64_t ple_stride, std::int64_t rows, std::int64_t p, T* g) {
#pragma omp parallel for schedule(static) if (parallel_worth(rows * p))
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < p; ++j) g[r * p + j] = gelu_tanh(a[r * p + j]) * ple_l[r * ple_stride + j];
}

template <class T>
void ple_gate_backward(const T* a, const T* ple_l, std::int64_t ple_stride, const T* dg, std::int64_t rows,
                       std::int64_t p, T* da, T* d_ple_l) {
#pragma omp parallel for schedule(static) if (parallel_worth(rows * p))
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t j = 0; j < p; ++j) {
      const T x = a[r * p + j], e = ple_l[r * ple_stride + j], d = dg[r * p + j];
      da[r * p + j] = gelu_tanh_derivative(x) * e * d;
      d_ple_l[r * ple_stride + j] = gelu_tanh(x) * d;
    }
  }
}

template void ple_combine_forward<float>(const float*, const float*, std::int64_t, float*);
template void ple_combine_forward<double>(const double*, const double*, std::int64_t, double*);
template void ple_combine_backward<float>(const float*, std::int64_t, float*, float*);
template void ple_combine_backward<double>(const double*, std::int64_t, double*, double*);
template void ple_gate_forward<float>(const float*, const float*, std::int64_t, std::int64_t, std::int64_t, float*);
template void ple_gate_forward<double>(const double*, const double*, std::int64_t, std::int64_t, std::int64_t,
                                       double*);
template void ple_gate_backward<float>(const float*, const float*, std::int64_t, const float*, std::int64_t,
                                       std::int64_t, float*, float*);
template void ple_gate_backward<double>(const double*, const double*, std::int64_t, const double*, std::int64_t,
                                        std::int64_t, double*, double*);

}  // namespace tandem::gpu::ops::cpu
