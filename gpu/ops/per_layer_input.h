// The per-layer-input (PLE) mixing pieces of docs/gemma4.md §2.2 and §2.4.4 that are not linear, norm or
// embedding ops: the combination ple = (c + t) · 2^(−1/2) of the projected context c and the
// token part t, and the layer gate g = gelu_tanh(a) ⊙ ple_l, with their backwards (§6.1.8).
#pragma once

#include <cstdint>

#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"
#include "gpu/core/tensor.h"

namespace tandem::gpu::ops {

/// ple = (c + t) · 2^(−1/2), the sum first (docs/gemma4.md §5).
///   c    F32 [N, L·P]: per_layer_projection_norm(per_layer_model_projection(x0) · H^(−1/2))
///   t    F32 [N, L·P]: embed_tokens_per_layer[ids] · √P (embedding_forward)
///   ple  F32 [N, L·P], layer-major (layer l: columns l·P .. l·P+P−1); may be c or t (in place)
/// On failure ple is unspecified.
status ple_combine_forward(const exec_context& ctx, const tensor& c, const tensor& t, const tensor& ple);

/// dc = dt = dple · 2^(−1/2), written. dple F32 [N, W]; dc, dt F32 [N, W], either may be empty
/// to skip it, either may be dple itself. On failure dc and dt are unspecified.
status ple_combine_backward(const exec_context& ctx, const tensor& dple, const tensor& dc, const tensor& dt);

/// g = gelu_tanh(a) ⊙ ple[:, layer, :].
///   a      F32 [N, P]: per_layer_input_gate(h) of layer `layer`
///   ple    F32 [N, L, P] (the combined per-layer inputs of all layers), 0 <= layer < L
///   g      F32 [N, P]
/// On failure g is unspecified.
status ple_gate_forward(const exec_context& ctx, const tensor& a, const tensor& ple, std::int64_t layer, const tensor& g);

/// d_ple[:, layer, :] = gelu_tanh(a) ⊙ dg and da = gelu_tanh'(a) ⊙ ple[:, layer, :] ⊙ dg, both
/// written (each layer owns its slice; the other slices of d_ple are not touched).
///   a F32 [N, P], ple F32 [N, L, P], dg F32 [N, P], da F32 [N, P], d_ple F32 [N, L, P].
/// On failure da and d_ple are unspecified.
status ple_gate_backward(const exec_context& ctx, const tensor& a, const tensor& ple, std::int64_t layer, const tensor& dg, const tensor& da,
                         const tensor& d_ple);

}  // namespace tandem::gpu::ops
