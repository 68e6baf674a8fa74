// RoPE on the CPU: float32 frequencies and angles (as HF computes them), cos/sin in the table's
// type, and the half-split rotation in the activation's type.
#include "gpu/ops/cpu/rope.h"

#include <cmath>

#include "gpu/ops/cpu/parallel.h"

namespace tandem::gpu::ops::cpu {

void rope_inv_freq(std::int64_t half, std::int64_t head_dim, std::int64_t rotated, float theta, float factor,
                   float* out) {
  for (std::int64_t j = 0; j < half; ++j) {
    float v = 0.0f;
    if (j < rotated) {
      const float exponent = static_cast<float>(2 * j) / static_cast<float>(head_dim);
      v = 1.0f / std::pow(theta, exponent);
    }
    out[j] = v / factor;
  }
}

template <class T>
void rope_tables(const std::int32_t* positions, std::int64_t n, const float* inv_freq, std::int64_t half, T* cos,
                 T* sin) {
  const std::int64_t d = 2 * half;
#pragma omp parallel for schedule(static) if (parallel_worth(n * d))
  for (std::int64_t t = 0; t < n; ++t) {
    const float pos = static_cast<float>(positions[t]);
    for (std::int64_t j = 0; j < half; ++j) {
      const float angle = pos * inv_freq[j];
      const T c = std::cos(static_cast<T>(angle)), s = std::sin(static_cast<T>(angle));
      cos[t * d + j] = cos[t * d + j + half] = c;
      sin[t * d + j] = sin[t * d + j + half] = s;
    }
  }
}

template <class T>
void rope_rotate(const T* x, std::int64_t tokens, std::int64_t heads, std::int64_t d, const T* cos, const T* sin, T* y,
                 bool inverse) {
  const std::int64_t half = d / 2;
#pragma omp parallel for schedule(static) if (parallel_worth(tokens * heads * d))
  for (std::int64_t t = 0; t < tokens; ++t) {
    const T* c = cos + t * d;
    const T* s = sin + t * d;
    for (std::int64_t h = 0; h < heads; ++h) {
      const T* xi = x + (t * heads + h) * d;
      T* yo = y + (t * heads + h) * d;
      for (std::int64_t j = 0; j < half; ++j) {
        const T a = xi[j], b = xi[j + half];  // both read before either is written (in place)
        if (!inverse) {
          yo[j] = a * c[j] - b * s[j];
          yo[j + half] = b * c[j + half] + a * s[j + half];
        } else {
          yo[j] = a * c[j] + b * s[j + half];
          yo[j + half] = b * c[j + half] - a * s[j];
        }
      }
    }
  }
}

template void rope_tables<float>(const std::int32_t*, std::int64_t, const float*, std::int64_t, float*, float*);
template void rope_tables<double>(const std::int32_t*, std::int64_t, const float*, std::int64_t, double*, double*);
template void rope_rotate<float>(const float*, std::int64_t, std::int64_t, std::int64_t, const float*, const float*,
                                 float*, bool);
template void rope_rotate<double>(const double*, std::int64_t, std::int64_t, std::int64_t, const double*,
                                  const double*, double*, bool);

}  // namespace tandem::gpu::ops::cpu
