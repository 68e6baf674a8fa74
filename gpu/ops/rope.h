// Rotary position embedding (docs/gemma4.md §1.4, §2.4.1): inverse frequencies for the "default" and
// "proportional" RoPE types, cos/sin tables from positions, and the NeoX half-split rotation of
// [tokens, heads, d] with its backward (the rotation by −θ).
#pragma once

#include <cstdint>

#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"
#include "gpu/core/tensor.h"

namespace tandem::gpu::ops {

/// HF's rope_type: "default" (sliding layers) or "proportional" (full layers).
enum class rope_kind { standard, proportional };

struct rope_parameters {
  rope_kind kind = rope_kind::standard;
  double theta = 10000.0;               ///< rope_theta, > 0
  double partial_rotary_factor = 1.0;   ///< proportional only, in [0, 1]
  double factor = 1.0;                  ///< proportional only, > 0 (published configs: 1.0)

  bool operator==(const rope_parameters&) const = default;
};

/// inv_freq F32 [head_dim / 2], computed in float32 like HF (docs/gemma4.md §5):
///   default:      inv_freq[j] = 1 / θ^(2j/d) for every j < d/2 (partial_rotary_factor ignored);
///   proportional: R = int(partial_rotary_factor · d // 2); inv_freq[j] = 1 / θ^(2j/d) (the FULL d
///                 in the denominator) for j < R, 0 for R <= j < d/2; then every entry / factor.
/// head_dim must be even and positive. On failure inv_freq is unspecified.
status rope_inv_freq(const exec_context& ctx, const rope_parameters& p, std::int64_t head_dim, const tensor& inv_freq);

/// cos, sin [n, d] from positions I32 [n] (each >= 0) and inv_freq F32 [d/2]:
/// angle_j = float32(pos) · inv_freq[j] in float32 (docs/gemma4.md §1.4, on every path), emb = concat(angle,
/// angle); cos/sin are then evaluated in the tables' dtype: F32 (cosf/sinf, full range reduction)
/// or F64 (double-accurate cos/sin of the same float32 angles, the reference of the float path).
/// A zero frequency gives cos 1, sin 0. On failure cos and sin are unspecified.
status rope_tables(const exec_context& ctx, const tensor& positions, const tensor& inv_freq, const tensor& cos, const tensor& sin);

/// y = rope(x), the NeoX half-split rotation with h = d/2, for every head of token t:
///   y_j   = x_j · cos[t, j] − x_{j+h} · sin[t, j]
///   y_{j+h} = x_{j+h} · cos[t, j+h] + x_j · sin[t, j+h]          (j < h)
///   x  F32 [tokens, heads, d], d even;  cos, sin F32 [tokens, d] (rows of rope_tables for the
///   tokens' positions);  y F32 [tokens, heads, d], may be x itself (in place), no other overlap.
/// On failure y is unspecified; the inputs are untouched (unless y is x).
status rope_forward(const exec_context& ctx, const tensor& x, const tensor& cos, const tensor& sin, const tensor& y);

/// dx = rope⁻¹(dy), the rotation by −θ (the transpose of the forward):
///   dx_j = dy_j · cos[t, j] + dy_{j+h} · sin[t, j+h];  dx_{j+h} = dy_{j+h} · cos[t, j+h] − dy_j · sin[t, j].
/// Written (the rotated q/k has one consumer; sum K gradients of shared layers before calling).
///   dy F32 [tokens, heads, d];  cos, sin F32 [tokens, d];  dx F32 [tokens, heads, d], may be dy.
/// On failure dx is unspecified.
status rope_backward(const exec_context& ctx, const tensor& dy, const tensor& cos, const tensor& sin, const tensor& dx);

}  // namespace tandem::gpu::ops
