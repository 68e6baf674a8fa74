// gelu_tanh and its derivative from one tanhf (nvcc only), for the backwards that need both (the
// gated MLP's and the per-layer-input gate's): the formulas of device_math.cuh's gelu_tanh and
// gelu_tanh_derivative, in the same order, sharing t.
#pragma once

#include "gpu/ops/cuda/device_math.cuh"

namespace tandem::gpu::ops::cuda {

struct gelu_and_slope {
  float value;  ///< gelu_tanh(x)
  float slope;  ///< gelu_tanh'(x)
};

/// t = tanh(√(2/π)(x + 0.044715 x³)); gelu = 0.5 x (1 + t);
/// gelu' = 0.5 (1 + t) + 0.5 x (1 − t²) √(2/π) (1 + 3 · 0.044715 x²).
__device__ __forceinline__ gelu_and_slope gelu_tanh_with_slope(float x) {
  constexpr float k = 0.7978845608028654f;
  const float t = tanhf(k * (x + 0.044715f * x * x * x));
  return {0.5f * x * (1.f + t), 0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * k * (1.f + 3.f * 0.044715f * x * x)};
}

}  // namespace tandem::gpu::ops::cuda
