// The online softmax of one query row over key tiles, in the mma accumulator layout (nvcc only;
// private to the bfloat16 attention forwards: attention_wgmma_forward.cuh and
// attention_decode.cuh). Both kernels call this one routine, so a row gets the same bits from
// either whatever tensor-core instruction computed its scores.
//
// Layout: the row's scores of a key tile of 8·NT positions are spread over the four threads
// t = 0..3 of its lane group; n-tile i's columns 8i + 2t and 8i + 2t + 1 sit at s[4i + 2R] and
// s[4i + 2R + 1] (R = 0: the thread's row g, R = 1: its row g + 8; the other two entries belong
// to the other row and are not touched).
//
// Per tile: s2 = scale2·s (scale2 = scaling·log2 e; -inf where the key is masked); m' = the
// tile's max s2 where it passes m by more than rescale_margin (or m is -inf), else m (lazy
// rescaling, as FlashAttention 4 does it: the same function, p at most 2^rescale_margin, and most
// tiles leave m alone); p = exp2(s2 - m') (kept unrounded in s); l' = l·alpha + Σ p with
// alpha = exp2(m - m'), exactly 1 where m' = m (Σ p: the thread's entries in n-tile order, then
// the lane group's partial sums by xor 1 and xor 2); the caller rescales its accumulators by alpha
// (and may skip it where alpha is 1). Each exp2 is one ex2.approx.ftz: exp2f's result except
// below 2^-126, where it gives +0. A row that has seen no key keeps m = -inf, l = 0
// (p = exp2(-inf) = 0, alpha = 1); a tile the row sees nothing of leaves m, l and (alpha = 1,
// p = 0) the accumulators unchanged, so which key tiles a block visits beyond a row's own does not
// change the row's bits.
#pragma once

#include <cstdint>

#include "gpu/ops/cuda/device_math.cuh"

namespace tandem::gpu::ops::cuda::attn::mma {

/// How far (log2 units) a tile's max may pass the running max before the row rescales: p is then
/// at most 2^8 (exact in float32 and bfloat16's range as ever), and a tile whose max stays within
/// it leaves the accumulators untouched (alpha = 1), so the caller can skip their rescaling.
constexpr float rescale_margin = 8.f;

template <int SR, int R>
struct online_row {
  static_assert(SR % 4 == 0 && (R == 0 || R == 1), "SR = 4 per n-tile; R picks the thread's row");
  float m = -INFINITY;  // running max of s2
  float l = 0.f;        // running Σ p

  /// The tile's scores of this row (key positions j0 + 8i + 2t + e) scaled and masked: visible
  /// when pos >= 0 and first <= j <= pos, every key when `whole` (the caller knows the tile lies
  /// inside the row's window: the same bits as the mask would give).
  __device__ __forceinline__ float scale_mask_max(float (&s)[SR], int j0, int t, int pos, int first, bool whole,
                                                  float scale2) const {
    float mx = -INFINITY;
    if (whole) {
#pragma unroll
      for (int i = 0; i < SR; i += 4) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float& x = s[i + 2 * R + e];
          x = __fmul_rn(x, scale2);
          mx = fmaxf(mx, x);
        }
      }
    } else {
#pragma unroll
      for (int i = 0; i < SR; i += 4) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int j = j0 + 2 * i + 2 * t + e;  // n-tile i / 4 covers positions 8 (i / 4) ..
          float& x = s[i + 2 * R + e];
          x = pos >= 0 && j >= first && j <= pos ? __fmul_rn(x, scale2) : -INFINITY;
          mx = fmaxf(mx, x);
        }
      }
    }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    return fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
  }

  /// Replaces the row's scaled scores by p, updates m and l from the tile's max `mx` (of
  /// scale_mask_max), and returns alpha, the factor of the row's accumulators.
  __device__ __forceinline__ float update(float (&s)[SR], float mx) {
    // m moves only when the tile's max passes it by more than rescale_margin (or m is still
    // -inf): otherwise alpha is exactly 1 and the caller's accumulators stay as they are.
    const float mn = mx > m + rescale_margin ? mx : m;
    const float base = mn == -INFINITY ? 0.f : mn;
    const float alpha = mn == m ? 1.f : exp2_approx(m - mn);
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < SR; i += 4) {
      s[i + 2 * R] = exp2_approx(s[i + 2 * R] - base);
      s[i + 2 * R + 1] = exp2_approx(s[i + 2 * R + 1] - base);
      sum = __fadd_rn(__fadd_rn(sum, s[i + 2 * R]), s[i + 2 * R + 1]);
    }
    sum = __fadd_rn(sum, __shfl_xor_sync(0xffffffffu, sum, 1));
    sum = __fadd_rn(sum, __shfl_xor_sync(0xffffffffu, sum, 2));
    l = __fadd_rn(__fmul_rn(l, alpha), sum);
    m = mn;
    return alpha;
  }

  /// The factor of the final accumulators (a row with a real query has seen itself: l >= 1).
  __device__ __forceinline__ float inverse() const { return 1.f / l; }

  /// ln Σ exp(scaling·s) over the row's keys.
  __device__ __forceinline__ float lse() const { return fmaf(m, 0.6931471805599453f /* ln 2 */, logf(l)); }
};

/// An output element: acc · inv rounded to bfloat16's pair, an exact zero as +0.
__device__ __forceinline__ float scaled_output(float acc, float inv) { return __fadd_rn(__fmul_rn(acc, inv), 0.f); }

}  // namespace tandem::gpu::ops::cuda::attn::mma
