// CUDA kernels of the PLE mixing pieces (gpu/ops/per_layer_input.h), float32 or bfloat16 storage
// (`storage`), float32 arithmetic; bfloat16 storage rounds each output once. The caller has
// checked every argument; the work is enqueued on the context's stream.
#pragma once

#include <cstdint>

#include "gpu/core/dtype.h"
#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"
#include "gpu/core/tensor.h"

namespace tandem::gpu::ops::cuda {

/// ple = (c + t) · 2^(−1/2). c, t, ple [N, W] (storage); ple may be c or t.
status ple_combine_forward(const exec_context& ctx, dtype storage, const tensor& c, const tensor& t,
                           const tensor& ple);

/// dc = dt = dple · 2^(−1/2), written. dple [N, W] (storage); dc, dt [N, W] (storage) or empty,
/// either may be dple.
status ple_combine_backward(const exec_context& ctx, dtype storage, const tensor& dple, const tensor& dc,
                            const tensor& dt);

/// g = gelu_tanh(a) ⊙ ple[:, layer, :]. a, g [N, P], ple [N, L, P] (storage), 0 <= layer < L.
status ple_gate_forward(const exec_context& ctx, dtype storage, const tensor& a, const tensor& ple,
                        std::int64_t layer, const tensor& g);

/// d_ple[:, layer, :] = gelu_tanh(a) ⊙ dg, da = gelu_tanh'(a) ⊙ ple[:, layer, :] ⊙ dg, written; the
/// other slices of d_ple untouched. a, dg, da [N, P], ple, d_ple [N, L, P] (storage).
status ple_gate_backward(const exec_context& ctx, dtype storage, const tensor& a, const tensor& ple,
                         std::int64_t layer, const tensor& dg, const tensor& da, const tensor& d_ple);

}  // namespace tandem::gpu::ops::cuda
