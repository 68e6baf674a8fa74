// CPU kernels of logit softcapping (gpu/ops/softcap.h); the caller has checked every argument.
#pragma once

#include <cstdint>

namespace tandem::gpu::ops::cpu {

/// y [n] = tanh(x / cap) · cap.
template <class T>
void softcap_forward(const T* x, std::int64_t n, T cap, T* y);

/// dx [n] = dy · (1 − tanh²(x / cap)).
template <class T>
void softcap_backward(const T* x, const T* dy, std::int64_t n, T cap, T* dx);

}  // namespace tandem::gpu::ops::cpu
