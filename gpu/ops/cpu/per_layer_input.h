// CPU kernels of the PLE mixing pieces (gpu/ops/per_layer_input.h); the caller has checked every
// argument.
#pragma once

#include <cstdint>

namespace tandem::gpu::ops::cpu {

/// ple [n] = (c + t) · 2^(−1/2).
template <class T>
void ple_combine_forward(const T* c, const T* t, std::int64_t n, T* ple);

/// dc, dt [n] = dple · 2^(−1/2); either may be null.
template <class T>
void ple_combine_backward(const T* dple, std::int64_t n, T* dc, T* dt);

/// g [rows, p] = gelu_tanh(a) ⊙ ple_l, where ple_l's rows are `ple_stride` apart.
template <class T>
void ple_gate_forward(const T* a, const T* ple_l, std::int64_t ple_stride, std::int64_t rows, std::int64_t p, T* g);

/// d_ple_l (rows `ple_stride` apart) = gelu_tanh(a) ⊙ dg; da = gelu_tanh'(a) ⊙ ple_l ⊙ dg.
template <class T>
void ple_gate_backward(const T* a, const T* ple_l, std::int64_t ple_stride, const T* dg, std::int64_t rows,
                       std::int64_t p, T* da, T* d_ple_l);

}  // namespace tandem::gpu::ops::cpu
