// CPU kernels of RoPE (gpu/ops/rope.h); the caller has checked every argument.
#pragma once

#include <cstdint>

namespace tandem::gpu::ops::cpu {

/// out [half]: 1 / θ^(2j/head_dim) / factor for j < rotated, 0 beyond, all in float32.
void rope_inv_freq(std::int64_t half, std::int64_t head_dim, std::int64_t rotated, float theta, float factor,
                   float* out);

/// cos, sin [n, 2·half] from positions [n] and inv_freq [half]; angles in float32.
template <class T>
void rope_tables(const std::int32_t* positions, std::int64_t n, const float* inv_freq, std::int64_t half, T* cos,
                 T* sin);

/// y [tokens, heads, d] = x rotated by +θ (inverse: by −θ); y may equal x.
template <class T>
void rope_rotate(const T* x, std::int64_t tokens, std::int64_t heads, std::int64_t d, const T* cos, const T* sin, T* y,
                 bool inverse);

}  // namespace tandem::gpu::ops::cpu
