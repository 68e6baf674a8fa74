// CPU reference kernels of the MoE block (router and experts, forward and backward), templated on
// float and double. Callers (gpu/ops/moe.cpp) have checked every shape, dtype and index; pointers
// marked "may be null" are optional outputs. Layouts are row-major as documented in gpu/ops/moe.h.
#pragma once

#include <cstdint>

namespace tandem::gpu::ops::cpu {

/// Sizes of one MoE call: tokens N, hidden H, experts E, top-k K, expert intermediate Im.
struct moe_dims {
  std::int64_t tokens = 0;
  std::int64_t hidden = 0;
  std::int64_t experts = 0;
  std::int64_t top_k = 0;
  std::int64_t intermediate = 0;  // experts only
};

/// Router forward; renormalized and inv_rms may be null.
template <class T>
void moe_router_forward(const moe_dims& d, const T* x, const T* router_scale, const T* proj, const T* per_expert_scale,
                        T eps, T* weights, std::int32_t* indices, T* renormalized, T* inv_rms);

/// Router backward; dx (written or accumulated), dproj, drouter_scale and dper_expert_scale (+=) may be null.
template <class T>
void moe_router_backward(const moe_dims& d, const T* x, const T* router_scale, const T* proj, const T* per_expert_scale,
                         const std::int32_t* indices, const T* renormalized, const T* inv_rms, const T* dweights, T* dx,
                         bool accumulate_dx, T* dproj, T* drouter_scale, T* dper_expert_scale);

/// Experts forward: out [N, H] written.
template <class T>
void moe_experts_forward(const moe_dims& d, const T* y, const T* gate_up, const T* down, const T* weights,
                         const std::int32_t* indices, T* out);

/// Experts backward; dy (written or accumulated), dgate_up, ddown (+=) and dweights (written) may be null.
template <class T>
void moe_experts_backward(const moe_dims& d, const T* y, const T* gate_up, const T* down, const T* weights,
                          const std::int32_t* indices, const T* dout, T* dy, bool accumulate_dy, T* dgate_up, T* ddown,
                          T* dweights);

}  // namespace tandem::gpu::ops::cpu
