// CPU kernels of the gated GELU activation (gpu/ops/gated_mlp.h), and the scalar tanh-form GELU and
// its derivative shared with the per-layer-input gate; the caller has checked every argument.
#pragma once

#include <cmath>
#include <cstdint>

namespace tandem::gpu::ops::cpu {

/// gelu_tanh(x) = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), evaluated in T in this order.
template <class T>
inline T gelu_tanh(T x) {
  const T beta = static_cast<T>(0.79788456080286535588);  // √(2/π)
  const T kappa = static_cast<T>(0.044715);
  const T inner = beta * (x + kappa * (x * x * x));
  return T(0.5) * x * (T(1) + std::tanh(inner));
}

/// d/dx gelu_tanh(x) = 0.5·(1 + t) + 0.5·x·(1 − t²)·√(2/π)·(1 + 3·0.044715·x²).
template <class T>
inline T gelu_tanh_derivative(T x) {
  const T beta = static_cast<T>(0.79788456080286535588);
  const T kappa = static_cast<T>(0.044715);
  const T t = std::tanh(beta * (x + kappa * (x * x * x)));
  return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * beta * (T(1) + T(3) * kappa * x * x);
}

/// y [n] = gelu_tanh(x [n]).
template <class T>
void gelu_tanh_forward(const T* x, std::int64_t n, T* y);

/// dx [n] (= or +=) gelu_tanh'(x) · dy.
template <class T>
void gelu_tanh_backward(const T* x, const T* dy, std::int64_t n, T* dx, bool accumulate);

/// h [rows, cols] = gelu_tanh(gate) ⊙ up; gate and up rows are `in_stride` apart.
template <class T>
void gated_gelu_forward(const T* gate, const T* up, std::int64_t in_stride, std::int64_t rows, std::int64_t cols,
                        T* h);

/// dgate, dup (rows `grad_stride` apart) from gate, up (rows `in_stride` apart) and dh [rows, cols].
template <class T>
void gated_gelu_backward(const T* gate, const T* up, std::int64_t in_stride, const T* dh, std::int64_t rows,
                         std::int64_t cols, T* dgate, T* dup, std::int64_t grad_stride);

}  // namespace tandem::gpu::ops::cpu
