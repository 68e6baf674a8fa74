// RMSNorm on CUDA. Rows of 16-byte-aligned vectors (every pointer 16-byte aligned, d a multiple of
// the vector width, at most 256·K vectors): a group of G threads per row (several rows per block),
// each thread holding its K vectors of the row in registers between the row's sum and the output,
// so x (and dy) are read once, with 16-byte loads and stores. The backward fuses dx and dw: each
// block takes a fixed chunk of rows, its threads copying the x and dy of the rows two iterations
// ahead into their own shared-memory slots (cp.async, a 3-stage pipeline: ~40 KB in flight per
// block without registers), every thread keeps its columns' dw partial in registers, the block's groups add
// theirs in group order, and a finish kernel (a programmatic dependent launch, so its launch
// overlaps the rows kernel's last blocks) adds the blocks' partials in block order. Rows of at
// most 32 vectors take a kernel without stages instead: a warp a row, the next row's loads in
// registers while this one is computed (the same arithmetic a row). Other rows
// take the scalar path: one block per row for y and dx (the fixed block tree of device_math.cuh),
// dw by column tiles x row chunks. Every sum has one order per shape: deterministic.
#include "gpu/ops/cuda/rmsnorm.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "gpu/ops/cuda/device_math.cuh"
#include "gpu/ops/cuda/elementwise.h"
#include "gpu/ops/cuda/rope.h"
#include "gpu/ops/cuda/launch.h"
#include "gpu/ops/cuda/row_vectors.cuh"
#include "gpu/ops/op_check.h"
#include "gpu/ops/scratch.h"

namespace tandem::gpu::ops::cuda {
namespace {

constexpr int row_threads = 256;

// ---------------------------------------------------------------------------------------------
// kernels

/// Block r: inv = (mean(x_r²) + eps)^(-1/2), y_r = x_r · inv · w.
template <class S>
__global__ void rmsnorm_forward_kernel(const S* x, const S* __restrict__ w, std::int64_t d, float eps,
                                       S* y, float* __restrict__ inv_rms) {
  __shared__ float shared[32];
  const std::int64_t r = blockIdx.x;
  const S* xr = x + r * d;
  float sum = 0.f;
  for (std::int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    const float v = to_float(xr[j]);
    sum += v * v;
  }
  sum = block_sum(sum, shared);
  const float inv = 1.f / sqrtf(sum / static_cast<float>(d) + eps);
  if (inv_rms && threadIdx.x == 0) inv_rms[r] = inv;
  S* yr = y + r * d;  // may alias xr: each element is read before its own write
  for (std::int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    const float v = to_float(xr[j]) * inv;
    yr[j] = from_float<S>(w ? v * to_float(w[j]) : v);
  }
}

/// Block r: dx_r = inv · (dn − n · mean(dn · n)) with n = x · inv, dn = dy · w.
template <class S>
__global__ void rmsnorm_dx_kernel(const S* __restrict__ x, const S* __restrict__ w, const float* __restrict__ inv_rms,
                                  const S* __restrict__ dy, std::int64_t d, S* __restrict__ dx, bool accumulate) {
  __shared__ float shared[32];
  const std::int64_t r = blockIdx.x;
  const S* xr = x + r * d;
  const S* gr = dy + r * d;
  const float inv = inv_rms[r];
  float dot = 0.f;
  for (std::int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    const float dn = to_float(gr[j]) * (w ? to_float(w[j]) : 1.f);
    dot += dn * to_float(xr[j]) * inv;
  }
  const float mean_dot = block_sum(dot, shared) / static_cast<float>(d);
  S* out = dx + r * d;
  for (std::int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    const float dn = to_float(gr[j]) * (w ? to_float(w[j]) : 1.f);
    const float g = inv * (dn - to_float(xr[j]) * inv * mean_dot);
    out[j] = from_float<S>(accumulate ? to_float(out[j]) + g : g);
  }
}

/// partial[c, j] = Σ_{rows of chunk c} dy · x · inv for columns j (one thread per column).
template <class S>
__global__ void rmsnorm_dw_partial_kernel(const S* __restrict__ x, const float* __restrict__ inv_rms,
                                          const S* __restrict__ dy, std::int64_t rows, std::int64_t d,
                                          std::int64_t rows_per_chunk, float* __restrict__ partial) {
  const std::int64_t j = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t c = blockIdx.y;
  if (j >= d) return;
  const std::int64_t begin = c * rows_per_chunk, end = std::min(rows, begin + rows_per_chunk);
  float acc = 0.f;
  for (std::int64_t r = begin; r < end; ++r) acc += to_float(dy[r * d + j]) * to_float(x[r * d + j]) * inv_rms[r];
  partial[c * d + j] = acc;
}

/// dw[j] += Σ_c partial[c, j], chunks in order.
template <class S>
__global__ void rmsnorm_dw_finish_kernel(const float* __restrict__ partial, std::int64_t chunks, std::int64_t d,
                                         S* __restrict__ dw) {
  const std::int64_t j = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= d) return;
  float acc = 0.f;
  for (std::int64_t c = 0; c < chunks; ++c) acc += partial[c * d + j];
  dw[j] = from_float<S>(to_float(dw[j]) + acc);
}

// ---------------------------------------------------------------------------------------------
// the vector path

constexpr int vec_threads = 256;

/// A thread's part of a row's sum of squares: its K vectors in order, their elements in order, one
/// FMA each (zeros past the row add nothing). The forward kernels share it, so that a norm gives
/// the same bits in every kernel that computes it.
template <class S, int K>
__device__ __forceinline__ float squares_of(const uint4 (&raw)[K]) {
  constexpr int V = width<S>;
  float sum = 0.f;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    float v[V];
    unpack<S>(raw[k], v);
#pragma unroll
    for (int e = 0; e < V; ++e) sum = fmaf(v[e], v[e], sum);
  }
  return sum;
}

/// (sum / d + eps)^(-1/2), as every forward kernel computes it.
__device__ __forceinline__ float inverse_rms(float sum, std::int64_t d, float eps) {
  return 1.f / sqrtf(sum / static_cast<float>(d) + eps);
}

/// The normed vector x · inv · w (w's vector, or 1 when w is null), two products per element.
template <class S>
__device__ __forceinline__ void normed(float (&v)[width<S>], float inv, const S* w, int c) {
  constexpr int V = width<S>;
  if (w) {
    float wv[V];
    unpack<S>(load16_nc(w + static_cast<std::int64_t>(c) * V), wv);
#pragma unroll
    for (int e = 0; e < V; ++e) v[e] = __fmul_rn(__fmul_rn(v[e], inv), wv[e]);
  } else {
#pragma unroll
    for (int e = 0; e < V; ++e) v[e] = __fmul_rn(v[e], inv);
  }
}

/// Blocks an SM should hold of rmsnorm_forward_vec_kernel: rows of six vectors a thread took 80
/// registers in eight slots (three blocks an SM: E2B's 4,096 rows of 1536 made 1.3 rounds of 396
/// blocks); in six, within 64 (no spill), four, and those rows one round.
template <int K>
inline constexpr int forward_min_blocks = K == 6 ? 4 : 1;

/// Rows of nv vectors, G threads per row, blockDim / G rows per block; thread t of a group holds
/// vectors t, t + G, ... (at most K). y may be x: a thread reads all its elements before it
/// writes them, and no thread touches another's.
template <class S, int G, int K>
__global__ void __launch_bounds__(vec_threads, forward_min_blocks<K>)
    rmsnorm_forward_vec_kernel(const S* x, const S* __restrict__ w, std::int64_t rows, int nv, float eps, S* y,
                               float* __restrict__ inv_rms) {
  constexpr int V = width<S>;
  const int R = static_cast<int>(blockDim.x) / G;  // rows per block (forward_rows_per_block)
  __shared__ float shared[vec_threads / 32];
  const int t = threadIdx.x % G;
  const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * R + threadIdx.x / G;
  const bool live = r < rows;
  const std::int64_t d = static_cast<std::int64_t>(nv) * V;
  const S* xr = x + r * d;
  uint4 raw[K];
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int c = t + k * G;
    raw[k] = make_uint4(0, 0, 0, 0);
    if (live && c < nv) raw[k] = load16(xr + static_cast<std::int64_t>(c) * V);
  }
  const float inv = inverse_rms(group_sum<G>(squares_of<S, K>(raw), shared), d, eps);
  if (!live) return;
  if (inv_rms && t == 0) inv_rms[r] = inv;
  S* yr = y + r * d;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int c = t + k * G;
    if (c >= nv) continue;
    float v[V];
    unpack<S>(raw[k], v);
    normed<S>(v, inv, w, c);
    *reinterpret_cast<uint4*>(yr + static_cast<std::int64_t>(c) * V) = pack<S>(v);
  }
}

/// The pointers of residual_norm_vec_kernel (gpu/ops/rmsnorm.h's residual_norm_io; null when
/// not given).
template <class S>
struct residual_rows {
  const S* x;
  const S* w;
  const S* residual;
  S* out;
  float* inv_rms;
  S* branch;
  const S* scale;
  S* pre_scale;
  const S* next_w;
  S* next;
  float* next_inv_rms;
};

/// rmsnorm_forward_vec_kernel's layout and arithmetic, twice over a row, with the add and the
/// scale between: a thread's vectors of x give the branch (rounded to S), the residual's same
/// vectors the sum (rounded), the scale the stream (rounded); the stream's vectors stay in
/// registers for the next norm. Every thread reads its elements before it writes them (out may be
/// residual).
template <class S, int G, int K>
__global__ void __launch_bounds__(vec_threads) residual_norm_vec_kernel(residual_rows<S> a, std::int64_t rows, int nv,
                                                                        float eps) {
  constexpr int V = width<S>;
  const int R = static_cast<int>(blockDim.x) / G;  // rows per block (forward_rows_per_block)
  __shared__ float shared[vec_threads / 32];
  const int t = threadIdx.x % G;
  const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * R + threadIdx.x / G;
  const bool live = r < rows;
  const std::int64_t d = static_cast<std::int64_t>(nv) * V;
  const auto at = [&](int c) { return r * d + static_cast<std::int64_t>(c) * V; };
  // Every load of the row up front: out may be residual, so a residual load after a store could
  // not be moved before it, and the thread's vectors would wait for memory one after another.
  uint4 raw[K], res_raw[K];
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int c = t + k * G;
    raw[k] = res_raw[k] = make_uint4(0, 0, 0, 0);
    if (live && c < nv) {
      raw[k] = load16(a.x + at(c));
      res_raw[k] = load16(a.residual + at(c));
    }
  }
  const float inv = inverse_rms(group_sum<G>(squares_of<S, K>(raw), shared), d, eps);
  const float scale = a.scale ? to_float(*a.scale) : 1.f;
#pragma unroll
  for (int k = 0; k < K; ++k) {  // raw[k] becomes the stream's vector (zeros past the row)
    const int c = t + k * G;
    if (!live || c >= nv) continue;
    float v[V], res[V];
    unpack<S>(raw[k], v);
    normed<S>(v, inv, a.w, c);
    const uint4 branch = pack<S>(v);
    if (a.branch) *reinterpret_cast<uint4*>(a.branch + at(c)) = branch;
    unpack<S>(branch, v);
    unpack<S>(res_raw[k], res);
#pragma unroll
    for (int e = 0; e < V; ++e) v[e] = __fadd_rn(res[e], v[e]);
    raw[k] = pack<S>(v);
    if (a.scale) {
      *reinterpret_cast<uint4*>(a.pre_scale + at(c)) = raw[k];
      unpack<S>(raw[k], v);
#pragma unroll
      for (int e = 0; e < V; ++e) v[e] = __fmul_rn(v[e], scale);
      raw[k] = pack<S>(v);
    }
    *reinterpret_cast<uint4*>(a.out + at(c)) = raw[k];
  }
  if (live && a.inv_rms && t == 0) a.inv_rms[r] = inv;
  if (!a.next_w) return;  // uniform over the grid
  const float next_inv = inverse_rms(group_sum<G>(squares_of<S, K>(raw), shared), d, eps);
  if (!live) return;
  if (a.next_inv_rms && t == 0) a.next_inv_rms[r] = next_inv;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int c = t + k * G;
    if (c >= nv) continue;
    float v[V];
    unpack<S>(raw[k], v);
    normed<S>(v, next_inv, a.next_w, c);
    *reinterpret_cast<uint4*>(a.next + at(c)) = pack<S>(v);
  }
}

/// Where the fused norm and rotation finds the partner of a column (j ± d/2) for the rotation.
///   lanes:  rows of at most 32 vectors, one a thread of a warp (K = 1, G = 32, nv a power of two):
///           vector c's partner is c ^ nv/2, in lane t ^ nv/2 (four shuffles a vector); these
///           rows take rmsnorm_rope_warp_kernel, the others rmsnorm_rope_vec_kernel.
///   slots:  rows of 2·G vectors, two a thread (K = 2): the partner of slot 0 is slot 1 of the same
///           thread.
///   shared: any other row: the block's normed rows meet in shared memory ([R][d] floats, dynamic).
/// The first two keep the row in registers: the shared-memory rows cost 8-way bank conflicts (a
/// thread's 8 consecutive floats), which held E2B's q norm and rotation to 42% of copy on an H100.
enum class rope_partner { lanes, slots, shared };

/// The partner placement for rows of nv vectors over G threads holding K each.
template <int G, int K>
rope_partner rope_partner_of(std::int64_t nv) {
  if (G == 32 && K == 1 && nv >= 2 && nv <= 32 && (nv & (nv - 1)) == 0) return rope_partner::lanes;
  if (K == 2 && nv == 2 * G) return rope_partner::slots;
  return rope_partner::shared;
}

/// The rotated vector of a thread's normed vector (rounded to S) from its partner's (the other half
/// of the row) and the column's cos and sin: rope_forward's pair math (device_math.cuh).
template <class S>
__device__ __forceinline__ uint4 rotated(const uint4& own, const uint4& partner, bool low_half, const uint4& cos_raw,
                                         const uint4& sin_raw) {
  constexpr int V = width<S>;
  float a[V], b[V], cv[V], sv[V], out[V];
  unpack<S>(own, a);
  unpack<S>(partner, b);
  unpack<S>(cos_raw, cv);
  unpack<S>(sin_raw, sv);
#pragma unroll
  for (int e = 0; e < V; ++e) out[e] = low_half ? rope_low(a[e], b[e], cv[e], sv[e]) : rope_high(b[e], a[e], cv[e], sv[e]);
  return pack<S>(out);
}

/// rmsnorm_forward_vec_kernel's layout and arithmetic over (token, head) rows of d = nv · V, then
/// RoPE's rotation of the rounded normed row, each column with its partner (j ± d/2) found where
/// P says (rope_partner: slots or shared; rows whose partner is in another lane take
/// rmsnorm_rope_warp_kernel). y may be x: a row's values are all loaded before any is written.
template <class S, int G, int K, rope_partner P>
__global__ void __launch_bounds__(vec_threads)
    rmsnorm_rope_vec_kernel(const S* x, const S* __restrict__ w, const S* __restrict__ cos, const S* __restrict__ sin,
                            std::int64_t rows, std::int64_t heads, int nv, float eps, S* y,
                            float* __restrict__ inv_rms) {
  static_assert(P != rope_partner::lanes, "a row a warp with its partner in another lane: rmsnorm_rope_warp_kernel");
  constexpr int V = width<S>;
  const int R = static_cast<int>(blockDim.x) / G;  // rows per block (forward_rows_per_block)
  __shared__ float shared[vec_threads / 32];
  extern __shared__ float normed_rows[];  // [R][d] when P is shared
  const int t = threadIdx.x % G;
  const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * R + threadIdx.x / G;
  const bool live = r < rows;
  const std::int64_t d = static_cast<std::int64_t>(nv) * V, half = d / 2;
  const std::int64_t token = r / heads;
  const S* const cr = cos + token * d;
  const S* const sr = sin + token * d;
  // Every load of the row up front (the rotation's cos and sin too), not after the sum.
  uint4 raw[K], cos_raw[K], sin_raw[K];
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int c = t + k * G;
    raw[k] = cos_raw[k] = sin_raw[k] = make_uint4(0, 0, 0, 0);
    if (live && c < nv) {
      raw[k] = load16(x + r * d + static_cast<std::int64_t>(c) * V);
      cos_raw[k] = load16_nc(cr + static_cast<std::int64_t>(c) * V);
      sin_raw[k] = load16_nc(sr + static_cast<std::int64_t>(c) * V);
    }
  }
  const float inv = inverse_rms(group_sum<G>(squares_of<S, K>(raw), shared), d, eps);
  if (live && inv_rms && t == 0) inv_rms[r] = inv;
#pragma unroll
  for (int k = 0; k < K; ++k) {  // raw[k] becomes the normed vector, rounded: what rmsnorm_forward stores
    const int c = t + k * G;
    if (!live || c >= nv) continue;
    float v[V];
    unpack<S>(raw[k], v);
    normed<S>(v, inv, w, c);
    raw[k] = pack<S>(v);
  }
  S* const yr = y + r * d;
  if constexpr (P == rope_partner::slots) {
    if (!live) return;
    const uint4 low = rotated<S>(raw[0], raw[1], true, cos_raw[0], sin_raw[0]);
    const uint4 high = rotated<S>(raw[1], raw[0], false, cos_raw[1], sin_raw[1]);
    *reinterpret_cast<uint4*>(yr + static_cast<std::int64_t>(t) * V) = low;
    *reinterpret_cast<uint4*>(yr + static_cast<std::int64_t>(t + G) * V) = high;
  } else {
    float* const row = normed_rows + static_cast<std::int64_t>(threadIdx.x / G) * d;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int c = t + k * G;
      if (!live || c >= nv) continue;
      float v[V];
      unpack<S>(raw[k], v);
#pragma unroll
      for (int e = 0; e < V; ++e) row[c * V + e] = v[e];
    }
    __syncthreads();
    if (!live) return;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int c = t + k * G;
      if (c >= nv) continue;
      float cv[V], sv[V], out[V];
      unpack<S>(cos_raw[k], cv);
      unpack<S>(sin_raw[k], sv);
#pragma unroll
      for (int e = 0; e < V; ++e) {
        const std::int64_t j = static_cast<std::int64_t>(c) * V + e;
        out[e] = j < half ? rope_low(row[j], row[j + half], cv[e], sv[e]) : rope_high(row[j - half], row[j], cv[e], sv[e]);
      }
      *reinterpret_cast<uint4*>(yr + static_cast<std::int64_t>(c) * V) = pack<S>(out);
    }
  }
}

/// Blocks an SM of rmsnorm_rope_warp_kernel: two rows' loads a lane in registers (x, cos and sin
/// of each) fit its 64 registers (53 used at bfloat16, 48 at float32; no spill).
constexpr int rope_warp_blocks = 4;

/// The q or k norm and rotation of rows of at most 32 vectors, a power of two (rope_partner::lanes:
/// a vector a lane, the partner of column c in lane c ^ nv/2, four shuffles a vector), a row a warp
/// in a grid of blocks all resident at once: warp w of W takes rows w, w + W, ..., and loads its
/// next row's x, cos and sin into registers before it computes this one, so a lane has two rows'
/// loads in flight where a block of single rows had one and then waited. Measured on an H100
/// against a block a row (op benchmark, E2B's q rows [4096, 8, 256]): 73% -> 79% of copy. The same
/// arithmetic a row as rmsnorm_forward_vec_kernel at G = 32, K = 1 and rope_forward: the same bits.
/// y may be x: a row's loads come before its stores, and no two warps share a row.
template <class S>
__global__ void __launch_bounds__(vec_threads, rope_warp_blocks)
    rmsnorm_rope_warp_kernel(const S* x, const S* __restrict__ w, const S* __restrict__ cos, const S* __restrict__ sin,
                             std::int64_t rows, std::int64_t heads, int nv, float eps, S* y, float* __restrict__ inv_rms) {
  constexpr int V = width<S>;
  const int t = static_cast<int>(threadIdx.x) & 31;
  const std::int64_t d = static_cast<std::int64_t>(nv) * V;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * (blockDim.x >> 5);
  // Row r's vectors of this lane (zeros past the rows and past the row's vectors).
  const auto load_row = [&](std::int64_t r, uint4& raw, uint4& cos_raw, uint4& sin_raw) {
    raw = cos_raw = sin_raw = make_uint4(0, 0, 0, 0);
    if (r < rows && t < nv) {
      const std::int64_t token = r / heads;
      raw = load16(x + r * d + static_cast<std::int64_t>(t) * V);
      cos_raw = load16_nc(cos + token * d + static_cast<std::int64_t>(t) * V);
      sin_raw = load16_nc(sin + token * d + static_cast<std::int64_t>(t) * V);
    }
  };
  std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  uint4 raw, cos_raw, sin_raw;
  load_row(r, raw, cos_raw, sin_raw);
  const int lane_mask = nv / 2;
#pragma unroll 1
  for (; r < rows; r += warps) {  // (uniform over the warp: the shuffles below take every lane)
    uint4 next_raw, next_cos, next_sin;
    load_row(r + warps, next_raw, next_cos, next_sin);
    const uint4 whole[1] = {raw};
    const float inv = inverse_rms(warp_sum(squares_of<S, 1>(whole)), d, eps);
    if (inv_rms && t == 0) inv_rms[r] = inv;
    if (t < nv) {  // raw becomes the normed vector, rounded: what rmsnorm_forward stores
      float v[V];
      unpack<S>(raw, v);
      normed<S>(v, inv, w, t);
      raw = pack<S>(v);
    }
    uint4 partner;
    partner.x = __shfl_xor_sync(0xffffffffu, raw.x, lane_mask);
    partner.y = __shfl_xor_sync(0xffffffffu, raw.y, lane_mask);
    partner.z = __shfl_xor_sync(0xffffffffu, raw.z, lane_mask);
    partner.w = __shfl_xor_sync(0xffffffffu, raw.w, lane_mask);
    if (t < nv)
      *reinterpret_cast<uint4*>(y + r * d + static_cast<std::int64_t>(t) * V) =
          rotated<S>(raw, partner, t < lane_mask, cos_raw, sin_raw);
    raw = next_raw;
    cos_raw = next_cos;
    sin_raw = next_sin;
  }
}

/// 16 bytes copied from global to shared memory asynchronously (cp.async, L2 only), in the
/// calling thread's current group of copies.
__device__ __forceinline__ void copy_async16(uint4* to, const void* from) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(to));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(from) : "memory");
}
/// 4 bytes copied from global to shared memory asynchronously (cp.async, through L1), likewise.
__device__ __forceinline__ void copy_async4(float* to, const float* from) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(to));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(s), "l"(from) : "memory");
}
__device__ __forceinline__ void commit_copies() { asm volatile("cp.async.commit_group;" ::: "memory"); }
/// Waits until at most N of the calling thread's groups of copies are still in flight.
template <int N>
__device__ __forceinline__ void wait_copies() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }

/// A vector of dx at p: inv · (dy·w - x · inv · mean_dot) (w taken as 1 without a weight), added to
/// p's old values when accumulating; the backward kernels' one formula, so a row gets the same bits
/// in each.
template <class S>
__device__ __forceinline__ void store_dx(S* p, const float (&xv)[width<S>], const float (&gv)[width<S>],
                                         const float (&wv)[width<S>], bool has_w, float inv, float mean_dot,
                                         bool accumulate) {
  constexpr int V = width<S>;
  float out[V];
  if (accumulate) {
    unpack<S>(load16(p), out);
  } else {
#pragma unroll
    for (int e = 0; e < V; ++e) out[e] = 0.f;  // (set on both paths: left unset, the narrow kernel spilled)
  }
#pragma unroll
  for (int e = 0; e < V; ++e) {
    const float dn = gv[e] * (has_w ? wv[e] : 1.f);
    const float gr = inv * (dn - xv[e] * inv * mean_dot);
    out[e] = accumulate ? out[e] + gr : gr;
  }
  *reinterpret_cast<uint4*>(p) = pack<S>(out);
}

/// Stages of the backward's copy pipeline: while the block computes one iteration (R rows), the
/// x and dy of the next stages - 1 are on their way into shared memory.
constexpr int backward_stages = 3;

/// Blocks an SM holds of the backward: two with three stages of up to three vectors a thread
/// (128 registers each).
template <int STAGES>
inline constexpr int backward_blocks_per_sm = 2;

/// Shared memory of rmsnorm_backward_vec_kernel: the stages, each x and dy of R rows of K · G
/// vectors (reused for the groups' dw sums, K · G · V floats, after the rows), then each stage's
/// inv_rms of the row, a float per thread.
template <class S, int K, int STAGES>
constexpr std::size_t backward_row_bytes = std::size_t{STAGES} * 2 * K * vec_threads * 16;
template <class S, int K, int STAGES>
constexpr std::size_t backward_shared_bytes =
    backward_row_bytes<S, K, STAGES> + std::size_t{STAGES} * vec_threads * sizeof(float);

/// Block b of B takes rows_per_block rows, interleaved with the other blocks': its i-th row is
/// b + i · B (so the blocks stream neighbouring rows together, which measured 75% of the copy
/// bandwidth against 71% for contiguous chunks of rows on an H100), group g its rows i = g, g + R,
/// ...; thread t of a group holds vectors t, t + G, ... (at most K) of each. Each thread copies its own
/// vectors of the rows STAGES - 1 iterations ahead into its own slots of shared memory, with the
/// row's inv_rms (cp.async; no other thread reads them, so no barrier guards them) and reads them
/// back when their iteration comes: no load from global memory waits in an iteration (a plain
/// load of inv_rms there held E2B's narrow rows to 51-56% of copy on an H100). dx (when given) as in rmsnorm_dx_kernel; partial[b, j] (when given) =
/// Σ over the block's rows of dy · x · inv: each thread sums its rows in order, then the groups in
/// group order.
template <class S, int G, int K, int STAGES>
__global__ void __launch_bounds__(vec_threads, backward_blocks_per_sm<STAGES>) rmsnorm_backward_vec_kernel(
    const S* __restrict__ x, const S* __restrict__ w, const float* __restrict__ inv_rms, const S* __restrict__ dy,
    std::int64_t rows, int nv, std::int64_t rows_per_block, S* __restrict__ dx, bool accumulate,
    float* __restrict__ partial) {
  constexpr int V = width<S>, R = vec_threads / G, slots = K * G;
  wait_for_prior_grid();  // launched as a dependent of the kernel before it: its writes (x, dy, ...) first
  __shared__ float shared[vec_threads / 32];
  extern __shared__ __align__(16) uint4 stage[];  // [STAGES][R][x, dy][K · G], then [STAGES][R · G] inv_rms
  float* const inv_stage = reinterpret_cast<float*>(stage + STAGES * R * 2 * slots);
  float* combine = reinterpret_cast<float*>(stage);  // K · G · V floats when R > 1 and partial
  const int t = threadIdx.x % G, g = threadIdx.x / G;
  const std::int64_t d = static_cast<std::int64_t>(nv) * V;
  // The block's i-th row (i < rows_per_block) is row blockIdx.x + i · gridDim.x: at any moment the
  // blocks read neighbouring rows, not rows_per_block rows apart.
  const auto row_of = [&](std::int64_t i) { return static_cast<std::int64_t>(blockIdx.x) + i * gridDim.x; };
  const auto row_live = [&](std::int64_t i) { return i < rows_per_block && row_of(i) < rows; };
  // w's vectors are reloaded per row (L1 hits): registers go to x, dy and the sums.
  auto load_w = [&](int c) { return w && c < nv ? load16_nc(w + static_cast<std::int64_t>(c) * V) : make_uint4(0, 0, 0, 0); };
  float acc[K][V];
#pragma unroll
  for (int k = 0; k < K; ++k)
#pragma unroll
    for (int e = 0; e < V; ++e) acc[k][e] = 0.f;

  // This thread's slots of stage i: x at [k], dy at [slots + k].
  auto slot = [&](std::int64_t i, int k) { return stage + ((i % STAGES) * R + g) * 2 * slots + k * G + t; };
  auto inv_slot = [&](std::int64_t i) { return inv_stage + (i % STAGES) * vec_threads + threadIdx.x; };
  // Copies of iteration i's row (nothing past the block's rows), one group per iteration.
  auto copy_row = [&](std::int64_t i) {
    const std::int64_t ri = i * R + g, r = row_of(ri);
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int c = t + k * G;
      if (row_live(ri) && c < nv) {
        const std::int64_t off = r * d + static_cast<std::int64_t>(c) * V;
        copy_async16(slot(i, k), x + off);
        copy_async16(slot(i, k) + slots, dy + off);
      }
    }
    if (row_live(ri)) copy_async4(inv_slot(i), inv_rms + r);
    commit_copies();
  };
#pragma unroll
  for (int i = 0; i < STAGES - 1; ++i) copy_row(i);
  std::int64_t it = 0;
#pragma unroll 1
  for (std::int64_t r0 = 0; r0 < rows_per_block; r0 += R, ++it) {  // the same trip count in every group
    const std::int64_t r = row_of(r0 + g);
    const bool live = row_live(r0 + g);
    copy_row(it + STAGES - 1);  // into the stage iteration it - 1 has read
    wait_copies<STAGES - 1>();  // iteration it's copies have landed
    uint4 xc[K], gc[K];
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const bool in = live && t + k * G < nv;
      xc[k] = in ? *slot(it, k) : make_uint4(0, 0, 0, 0);
      gc[k] = in ? *(slot(it, k) + slots) : make_uint4(0, 0, 0, 0);
    }
    const float inv = live ? *inv_slot(it) : 0.f;
    float dot = 0.f;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      float xv[V], gv[V], wv[V];
      unpack<S>(xc[k], xv);
      unpack<S>(gc[k], gv);
      unpack<S>(load_w(t + k * G), wv);
#pragma unroll
      for (int e = 0; e < V; ++e) {
        const float dn = gv[e] * (w ? wv[e] : 1.f);
        dot += dn * xv[e] * inv;
      }
    }
    const float mean_dot = group_sum<G>(dot, shared) / static_cast<float>(d);
    if (!live) continue;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int c = t + k * G;
      if (c >= nv) continue;
      float xv[V], gv[V];
      unpack<S>(xc[k], xv);
      unpack<S>(gc[k], gv);
      if (partial) {
#pragma unroll
        for (int e = 0; e < V; ++e) acc[k][e] += gv[e] * xv[e] * inv;
      }
      if (dx) {
        float wv[V];
        unpack<S>(load_w(c), wv);
        store_dx<S>(dx + r * d + static_cast<std::int64_t>(c) * V, xv, gv, wv, w != nullptr, inv, mean_dot, accumulate);
      }
    }
  }
  if (!partial) return;
  wait_copies<0>();  // the last (empty) groups; then every thread is done with the stages
  __syncthreads();
  float* prow = partial + static_cast<std::int64_t>(blockIdx.x) * d;
  // The groups in order: group 0 stores its sums, each next one adds its own, the last writes.
#pragma unroll 1
  for (int gg = 0; gg < R; ++gg) {
    if (g == gg) {
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const int c = t + k * G;
        if (c >= nv) continue;
#pragma unroll
        for (int e = 0; e < V; ++e) {
          float* slot = combine + (k * G + t) * V + e;
          const float s = gg == 0 ? acc[k][e] : *slot + acc[k][e];
          if (gg == R - 1)
            prow[static_cast<std::int64_t>(c) * V + e] = s;
          else
            *slot = s;
        }
      }
    }
    if (R > 1) __syncthreads();
  }
  allow_dependents();  // the finish kernel may start (it waits for this grid before it reads)
}

/// Blocks an SM holds of rmsnorm_backward_narrow_kernel (64 registers a thread, no shared memory
/// but the dw sums'): 32 warps.
constexpr int narrow_blocks_per_sm = 4;

/// Rows of at most 32 vectors (E2B's q norm and per-layer inputs' norm, 256 wide): a warp a row,
/// lane t its vector t, no shared-memory stages: warp g of block b takes the block's rows
/// i = g, g + R, ... (row b + i · B, interleaved as rmsnorm_backward_vec_kernel's), and loads its
/// next row's x, dy (16-byte loads) and inv_rms into registers before it computes this one; w's
/// vector stays in registers. A row's arithmetic is rmsnorm_backward_vec_kernel's at G = 32, K = 1
/// (the same dx bits); dw's partial[b, j] likewise, the warps added in warp order. Measured in the
/// op benchmark on an H100: [32768, 256] 81% of copy, [143360, 256] 85% (the eight-stage copy
/// pipeline it replaced: 49-51% and 76-77%; docs/cuda-kernel-notes.md).
template <class S>
__global__ void __launch_bounds__(vec_threads, narrow_blocks_per_sm) rmsnorm_backward_narrow_kernel(
    const S* __restrict__ x, const S* __restrict__ w, const float* __restrict__ inv_rms, const S* __restrict__ dy,
    std::int64_t rows, int nv, std::int64_t rows_per_block, S* __restrict__ dx, bool accumulate,
    float* __restrict__ partial) {
  constexpr int V = width<S>, R = vec_threads / 32;
  wait_for_prior_grid();  // launched as a dependent of the kernel before it: its writes (x, dy, ...) first
  __shared__ __align__(16) float combine[32 * V];
  const int t = static_cast<int>(threadIdx.x) % 32, g = static_cast<int>(threadIdx.x) / 32;
  const std::int64_t d = static_cast<std::int64_t>(nv) * V;
  const bool lane_in = t < nv;
  const auto row_of = [&](std::int64_t i) { return static_cast<std::int64_t>(blockIdx.x) + i * gridDim.x; };
  const auto row_live = [&](std::int64_t i) { return i < rows_per_block && row_of(i) < rows; };
  const uint4 zero = make_uint4(0, 0, 0, 0);
  const uint4 w_raw = w && lane_in ? load16_nc(w + static_cast<std::int64_t>(t) * V) : zero;
  float acc[V];
#pragma unroll
  for (int e = 0; e < V; ++e) acc[e] = 0.f;
  // Iteration i's row (zeros past the block's rows and the row's vectors).
  struct row_regs {
    uint4 x, g;
    float inv;
  };
  const auto load = [&](std::int64_t i) {
    const std::int64_t ri = i * R + g;
    const bool live = row_live(ri);
    const std::int64_t off = row_of(ri) * d + static_cast<std::int64_t>(t) * V;
    return row_regs{live && lane_in ? load16_stream(x + off) : zero, live && lane_in ? load16_stream(dy + off) : zero,
                    live ? __ldg(inv_rms + row_of(ri)) : 0.f};
  };
  const std::int64_t iterations = rows_per_block / R;  // rows_per_block is whole groups of R rows
  row_regs cur = load(0);
  // One row a trip, the next one's registers moved into the current ones at its end (a loop
  // unrolled over two slots instead spilled at 64 registers). A warp's own count: the row's sum
  // needs no other warp.
#pragma unroll 1
  for (std::int64_t i = 0; i < iterations; ++i) {
    const row_regs next = load(i + 1);  // the next row on its way while this one is computed
    const std::int64_t ri = i * R + g, r = row_of(ri);
    float xv[V], gv[V], wv[V];
    unpack<S>(cur.x, xv);
    unpack<S>(cur.g, gv);
    unpack<S>(w_raw, wv);
    float dot = 0.f;
#pragma unroll
    for (int e = 0; e < V; ++e) {
      const float dn = gv[e] * (w ? wv[e] : 1.f);
      dot += dn * xv[e] * cur.inv;
    }
    const float mean_dot = warp_sum(dot) / static_cast<float>(d);
    if (row_live(ri) && lane_in) {
      if (partial) {
#pragma unroll
        for (int e = 0; e < V; ++e) acc[e] += gv[e] * xv[e] * cur.inv;
      }
      if (dx) {
        store_dx<S>(dx + r * d + static_cast<std::int64_t>(t) * V, xv, gv, wv, w != nullptr, cur.inv, mean_dot,
                    accumulate);
      }
    }
    cur = next;
  }
  if (!partial) return;
  float* prow = partial + static_cast<std::int64_t>(blockIdx.x) * d;
  // The warps in order: warp 0 stores its sums, each next one adds its own, the last writes.
#pragma unroll 1
  for (int gg = 0; gg < R; ++gg) {
    if (g == gg && lane_in) {
#pragma unroll
      for (int e = 0; e < V; ++e) {
        float* slot = combine + t * V + e;
        const float v = gg == 0 ? acc[e] : *slot + acc[e];
        if (gg == R - 1)
          prow[static_cast<std::int64_t>(t) * V + e] = v;
        else
          *slot = v;
      }
    }
    __syncthreads();
  }
  allow_dependents();  // the finish kernel may start (it waits for this grid before it reads)
}

/// dw[j] += Σ_b partial[b, j]: finish_columns columns per block of 256 threads, finish_slices
/// slices of consecutive blocks each summed in order, then the slices by a shuffle tree (a warp a
/// column: the same tree on every run). Eight columns (a 32-byte sector a row) by 32 slices: a
/// thread adds at most 13 of the at most 528 partials (8 of 256 at E2B's rows of 1536), one round
/// of loads, where 32 columns by 8 slices took four, in 8 blocks on E2B's rows of 256. dw's old
/// value is read before the wait: only the rows kernel's partials are waited for (the kernel
/// before that one, the last to write dw, had completed before the rows kernel's blocks, which
/// each waited for it first, let this kernel start).
constexpr int finish_columns = 8, finish_slices = 32;
template <class S>
__global__ void __launch_bounds__(256) rmsnorm_dw_finish_vec_kernel(const float* __restrict__ partial,
                                                                    std::int64_t blocks, std::int64_t d,
                                                                    S* __restrict__ dw) {
  static_assert(finish_columns * finish_slices == 256 && finish_slices == 32, "a thread per (column, slice); a warp a column");
  __shared__ float sums[finish_slices][finish_columns];
  const int column = threadIdx.x % finish_columns, slice = threadIdx.x / finish_columns;
  const std::int64_t j = static_cast<std::int64_t>(blockIdx.x) * finish_columns + column;
  // The warp that finishes a column: warp w takes column w, lane l its slice l.
  const int lane = static_cast<int>(threadIdx.x) % 32, own = static_cast<int>(threadIdx.x) / 32;
  const std::int64_t own_j = static_cast<std::int64_t>(blockIdx.x) * finish_columns + own;
  const float old = lane == 0 && own_j < d ? to_float(dw[own_j]) : 0.f;
  wait_for_prior_grid();  // launched as a dependent of the rows kernel, which wrote partial
  const std::int64_t per = (blocks + finish_slices - 1) / finish_slices;
  const std::int64_t b0 = slice * per, b1 = std::min(blocks, b0 + per);
  float acc = 0.f;
  if (j < d) {
#pragma unroll 16
    for (std::int64_t b = b0; b < b1; ++b) acc += partial[b * d + j];
  }
  sums[slice][column] = acc;
  __syncthreads();
  if (own_j >= d) return;  // (uniform over the warp)
  const float total = warp_sum(sums[lane][own]);
  if (lane == 0) dw[own_j] = from_float<S>(old + total);
}

/// The vector path's shape for rows of nv vectors: G threads per row, the fewest in 32 .. 256 that
/// leave each at most K vectors; 0 when the row is too long.
template <int K>
int group_threads(std::int64_t nv) {
  for (int g = 32; g <= vec_threads; g *= 2)
    if (nv <= static_cast<std::int64_t>(g) * K) return g;
  return 0;
}

/// f(std::integral_constant<int, G>{}) for G in 32, 64, 128, 256.
template <class F>
status with_group(int g, F&& f) {
  switch (g) {
    case 32: return f(std::integral_constant<int, 32>{});
    case 64: return f(std::integral_constant<int, 64>{});
    case 128: return f(std::integral_constant<int, 128>{});
    default: return f(std::integral_constant<int, 256>{});
  }
}

bool aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }

constexpr int forward_k = 8;   // vectors per thread, forward

/// f(std::integral_constant<int, G>{}, std::integral_constant<int, K>{}) for the forward vector
/// kernels' rows of nv vectors over g threads: K, the vectors a thread holds, the fewest of 1, 2, 6
/// and forward_k that cover the row (6: the hidden rows of E2B, E4B and 26B-A4B, 1536, 2560 and
/// 2816 wide, fill it or nearly). A thread's slots past the row hold zeros, which add nothing to the
/// sum of squares (an FMA of zeros), so a row's bits depend on G alone; but every slot takes
/// registers (three of them a vector in rmsnorm_rope_vec_kernel): rows of 32 vectors in 8 slots
/// ran the q norm and rotation of E2B's step at 15% of copy on an H100.
template <class F>
status with_forward_shape(int g, std::int64_t nv, F&& f) {
  return with_group(g, [&](auto group) -> status {
    constexpr int G = decltype(group)::value;
    if (nv <= G) return f(group, std::integral_constant<int, 1>{});
    if (nv <= 2 * G) return f(group, std::integral_constant<int, 2>{});
    if (nv <= 6 * G) return f(group, std::integral_constant<int, 6>{});
    return f(group, std::integral_constant<int, forward_k>{});
  });
}

/// Rows per block of the forward vector kernels (blocks of R·G threads): 256 / G, halved while
/// that leaves fewer than two blocks per SM of an H100 / H200, down to one. A decode step's 256
/// rows of 1536 then run as 256 blocks of a warp instead of 32 blocks of 8 rows (32 of the 132
/// SMs). A row's arithmetic depends on G alone, so the bits do not change with R.
template <int G>
int forward_rows_per_block(std::int64_t rows) {
  int r = vec_threads / G;
  while (r > 1 && (rows + r - 1) / r < 2 * 132) r /= 2;
  return r;
}
/// Vectors per thread, backward: x and dy of two rows and the dw sums in registers, within the
/// 128 registers of two blocks per SM.
template <class S>
inline constexpr int backward_k = sizeof(S) == 2 ? 3 : 4;
/// The backward's grid: every block resident at once on the 132 SMs of an H100 / H200.
template <int STAGES>
inline constexpr std::int64_t backward_blocks = 132 * backward_blocks_per_sm<STAGES>;

}  // namespace

// ---------------------------------------------------------------------------------------------
// launchers

status rmsnorm_forward(const exec_context& ctx, dtype storage, const tensor& x, const tensor& w, double eps,
                       const tensor& y, const tensor& inv_rms) {
  constexpr const char* op = "rmsnorm_forward";
  TANDEM_RETURN_IF_ERROR(use_device(ctx));
  const std::int64_t rows = x.dim(0), d = x.dim(1);
  if (rows == 0) return status::ok();
  return with_storage(storage, op, [&](auto zero) -> status {
    using S = decltype(zero);
    constexpr int V = width<S>;
    const int g = d % V == 0 ? group_threads<forward_k>(d / V) : 0;
    if (g != 0 && aligned16(x.data()) && aligned16(y.data()) && (w.empty() || aligned16(w.data()))) {
      return with_forward_shape(g, d / V, [&](auto group, auto vectors) -> status {
        constexpr int G = decltype(group)::value, K = decltype(vectors)::value;
        const int R = forward_rows_per_block<G>(rows);
        const std::int64_t blocks = (rows + R - 1) / R;
        rmsnorm_forward_vec_kernel<S, G, K><<<static_cast<unsigned>(blocks), R * G, 0, stream_of(ctx)>>>(
            x.as<const S>(), w.empty() ? nullptr : w.as<const S>(), rows, static_cast<int>(d / V),
            static_cast<float>(eps), y.as<S>(), inv_rms.empty() ? nullptr : inv_rms.as<float>());
        return launch_status(op, "rmsnorm_forward_vec_kernel");
      });
    }
    rmsnorm_forward_kernel<S><<<static_cast<unsigned>(rows), row_threads, 0, stream_of(ctx)>>>(
        x.as<const S>(), w.empty() ? nullptr : w.as<const S>(), d, static_cast<float>(eps), y.as<S>(),
        inv_rms.empty() ? nullptr : inv_rms.as<float>());
    return launch_status(op, "rmsnorm_forward_kernel");
  });
}

status rmsnorm_rope_forward(const exec_context& ctx, dtype storage, const tensor& x, const tensor& w, double eps,
                            const tensor& cos, const tensor& sin, const tensor& y, const tensor& inv_rms) {
  constexpr const char* op = "rmsnorm_rope_forward";
  TANDEM_RETURN_IF_ERROR(use_device(ctx));
  const std::int64_t tokens = x.dim(0), heads = x.dim(1), d = x.dim(2), rows = tokens * heads;
  if (rows == 0) return status::ok();
  return with_storage(storage, op, [&](auto zero) -> status {
    using S = decltype(zero);
    constexpr int V = width<S>;
    const int g = d % V == 0 ? group_threads<forward_k>(d / V) : 0;
    const std::size_t smem = static_cast<std::size_t>(g > 0 ? vec_threads / g : 0) * static_cast<std::size_t>(d) * sizeof(float);
    if (g != 0 && smem <= 48 * 1024 && aligned16(x.data()) && aligned16(w.data()) && aligned16(cos.data()) &&
        aligned16(sin.data()) && aligned16(y.data())) {
      return with_forward_shape(g, d / V, [&](auto group, auto vectors) -> status {
        constexpr int G = decltype(group)::value, K = decltype(vectors)::value;
        const int R = forward_rows_per_block<G>(rows);
        const std::int64_t blocks = (rows + R - 1) / R;
        const auto launch = [&](auto partner_constant) {
          constexpr rope_partner P = decltype(partner_constant)::value;
          const std::size_t row_bytes =
              P == rope_partner::shared ? static_cast<std::size_t>(R) * static_cast<std::size_t>(d) * sizeof(float) : 0;
          rmsnorm_rope_vec_kernel<S, G, K, P><<<static_cast<unsigned>(blocks), R * G, row_bytes, stream_of(ctx)>>>(
              x.as<const S>(), w.as<const S>(), cos.as<const S>(), sin.as<const S>(), rows, heads, static_cast<int>(d / V),
              static_cast<float>(eps), y.as<S>(), inv_rms.empty() ? nullptr : inv_rms.as<float>());
          return launch_status(op, "rmsnorm_rope_vec_kernel");
        };
        const rope_partner partner = rope_partner_of<G, K>(d / V);  // instances only where they can be chosen
        if constexpr (G == 32 && K == 1) {
          if (partner == rope_partner::lanes) {  // a row a warp, every block resident, warps taking rows in turn
            const std::int64_t warp_blocks = std::min<std::int64_t>(blocks, 132 * rope_warp_blocks);
            rmsnorm_rope_warp_kernel<S><<<static_cast<unsigned>(warp_blocks), R * G, 0, stream_of(ctx)>>>(
                x.as<const S>(), w.as<const S>(), cos.as<const S>(), sin.as<const S>(), rows, heads,
                static_cast<int>(d / V), static_cast<float>(eps), y.as<S>(), inv_rms.empty() ? nullptr : inv_rms.as<float>());
            return launch_status(op, "rmsnorm_rope_warp_kernel");
          }
        }
        if constexpr (K == 2)
          if (partner == rope_partner::slots) return launch(std::integral_constant<rope_partner, rope_partner::slots>{});
        return launch(std::integral_constant<rope_partner, rope_partner::shared>{});
      });
    }
    TANDEM_RETURN_IF_ERROR(rmsnorm_forward(ctx, storage, x.reshaped({rows, d}), w, eps, y.reshaped({rows, d}), inv_rms));
    return rope_forward(ctx, storage, y, cos, sin, y);
  });
}

status residual_norm_forward(const exec_context& ctx, dtype storage, const residual_norm_io& io, double eps) {
  constexpr const char* op = "residual_norm_forward";
  TANDEM_RETURN_IF_ERROR(use_device(ctx));
  const std::int64_t rows = io.x.dim(0), d = io.x.dim(1);
  if (rows == 0) return status::ok();
  return with_storage(storage, op, [&](auto zero) -> status {
    using S = decltype(zero);
    constexpr int V = width<S>;
    const int g = d % V == 0 ? group_threads<forward_k>(d / V) : 0;
    bool aligned = true;
    for (const tensor* t : {&io.x, &io.w, &io.residual, &io.out, &io.branch, &io.pre_scale, &io.next_w, &io.next})
      aligned = aligned && (t->empty() || aligned16(t->data()));
    if (g != 0 && aligned) {
      const auto ptr = [](const tensor& t) { return t.empty() ? nullptr : t.as<S>(); };
      const auto stat = [](const tensor& t) { return t.empty() ? nullptr : t.as<float>(); };
      const residual_rows<S> a{ptr(io.x), ptr(io.w), ptr(io.residual), ptr(io.out), stat(io.inv_rms), ptr(io.branch),
                               ptr(io.scale), ptr(io.pre_scale), ptr(io.next_w), ptr(io.next), stat(io.next_inv_rms)};
      return with_forward_shape(g, d / V, [&](auto group, auto vectors) -> status {
        constexpr int G = decltype(group)::value, K = decltype(vectors)::value;
        const int R = forward_rows_per_block<G>(rows);
        const std::int64_t blocks = (rows + R - 1) / R;
        residual_norm_vec_kernel<S, G, K><<<static_cast<unsigned>(blocks), R * G, 0, stream_of(ctx)>>>(
            a, rows, static_cast<int>(d / V), static_cast<float>(eps));
        return launch_status(op, "residual_norm_vec_kernel");
      });
    }
    // Rows the vector path does not take: the ops in turn, the branch in scratch when not asked for.
    tensor branch = io.branch;
    if (branch.empty()) {
      auto scratch = op_scratch::get(ctx, op, static_cast<std::size_t>(rows * d) * sizeof(S));
      if (!scratch) return scratch.error();
      branch = tensor::contiguous(scratch->data(), storage, std::vector<std::int64_t>{rows, d}, io.x.dev());
    }
    TANDEM_RETURN_IF_ERROR(rmsnorm_forward(ctx, storage, io.x, io.w, eps, branch, io.inv_rms));
    const tensor& sum = io.scale.empty() ? io.out : io.pre_scale;
    TANDEM_RETURN_IF_ERROR(add_forward(ctx, storage, io.residual, branch, sum));
    if (!io.scale.empty()) TANDEM_RETURN_IF_ERROR(scale_by_forward(ctx, storage, sum, io.scale, io.out));
    if (!io.next_w.empty()) TANDEM_RETURN_IF_ERROR(rmsnorm_forward(ctx, storage, io.out, io.next_w, eps, io.next, io.next_inv_rms));
    return status::ok();
  });
}

status rmsnorm_backward(const exec_context& ctx, dtype storage, const tensor& x, const tensor& w, const tensor& inv_rms,
                        const tensor& dy, const tensor& dx, const tensor& dw, bool accumulate_dx) {
  constexpr const char* op = "rmsnorm_backward";
  TANDEM_RETURN_IF_ERROR(use_device(ctx));
  const std::int64_t rows = x.dim(0), d = x.dim(1);
  if (rows == 0 || (dx.empty() && dw.empty())) return status::ok();
  return with_storage(storage, op, [&](auto zero) -> status {
    using S = decltype(zero);
    const cudaStream_t stream = stream_of(ctx);
    constexpr int V = width<S>;
    const int g = d % V == 0 ? group_threads<backward_k<S>>(d / V) : 0;
    if (g != 0 && aligned16(x.data()) && aligned16(dy.data()) && (w.empty() || aligned16(w.data())) &&
        (dx.empty() || aligned16(dx.data()))) {
      return with_group(g, [&](auto group) -> status {
        constexpr int G = decltype(group)::value, R = vec_threads / G;
        // The kernel decides the grid (every block resident at once); a fixed number of rows per
        // block (the shape alone decides it; the kernel interleaves them across the blocks), whole
        // groups of R rows. rows_kernel(blocks, rows_per_block, partial) launches the rows.
        const auto launch = [&](std::int64_t grid, const char* kernel_name, auto&& rows_kernel) -> status {
          const std::int64_t groups = (rows + R - 1) / R;
          const std::int64_t rows_per_block = (groups + grid - 1) / grid * R;
          const std::int64_t blocks = (rows + rows_per_block - 1) / rows_per_block;
          float* partial = nullptr;
          if (!dw.empty()) {
            auto scratch = op_scratch::get(ctx, op, static_cast<std::size_t>(blocks * d) * sizeof(float));
            if (!scratch) return scratch.error();
            partial = reinterpret_cast<float*>(scratch->data());
          }
          TANDEM_RETURN_IF_ERROR(rows_kernel(blocks, rows_per_block, partial));
          TANDEM_RETURN_IF_ERROR(launch_status(op, kernel_name));
          if (!partial) return status::ok();
          const auto finish_blocks = static_cast<unsigned>((d + finish_columns - 1) / finish_columns);
          // A dependent launch: the finish's launch overlaps the rows kernel's last blocks.
          // (its error, as a launch's, is the last error)
          static_cast<void>(launch_dependent(rmsnorm_dw_finish_vec_kernel<S>, finish_blocks, 256, 0, stream,
                                             static_cast<const float*>(partial), blocks, d, dw.as<S>()));
          return launch_status(op, "rmsnorm_dw_finish_vec_kernel");
        };
        const S* wp = w.empty() ? nullptr : w.as<const S>();
        S* dxp = dx.empty() ? nullptr : dx.as<S>();
        const int nv = static_cast<int>(d / V);
        if constexpr (G == 32) {
          if (nv <= 32)
            return launch(132 * narrow_blocks_per_sm, "rmsnorm_backward_narrow_kernel",
                          [&](std::int64_t blocks, std::int64_t rows_per_block, float* partial) -> status {
                            // (a dependent launch, as the finish: its launch overlaps the last kernel's tail)
                            static_cast<void>(launch_dependent(rmsnorm_backward_narrow_kernel<S>, static_cast<unsigned>(blocks),
                                                               vec_threads, 0, stream, x.as<const S>(), wp,
                                                               inv_rms.as<const float>(), dy.as<const S>(), rows, nv,
                                                               rows_per_block, dxp, accumulate_dx, partial));
                            return status::ok();
                          });
        }
        constexpr int K = backward_k<S>, STAGES = backward_stages;
        return launch(backward_blocks<STAGES>, "rmsnorm_backward_vec_kernel",
                      [&](std::int64_t blocks, std::int64_t rows_per_block, float* partial) -> status {
                        constexpr std::size_t bytes = backward_shared_bytes<S, K, STAGES>;
                        static_assert(backward_row_bytes<S, K, STAGES> >= std::size_t{K} * G * V * sizeof(float),
                                      "the dw sums fit in the stages");
                        constexpr auto kernel = &rmsnorm_backward_vec_kernel<S, G, K, STAGES>;
                        TANDEM_RETURN_IF_ERROR(allow_shared_memory<kernel>(bytes));
                        static_cast<void>(launch_dependent(kernel, static_cast<unsigned>(blocks), vec_threads, bytes, stream,
                                                           x.as<const S>(), wp, inv_rms.as<const float>(), dy.as<const S>(),
                                                           rows, nv, rows_per_block, dxp, accumulate_dx, partial));
                        return status::ok();
                      });
      });
    }
    if (!dw.empty()) {
      // Enough chunks to fill the GPU with d columns; the chunk count depends on the shape only.
      constexpr int threads = 128;
      const std::int64_t column_blocks = (d + threads - 1) / threads;
      const std::int64_t chunks = std::clamp<std::int64_t>((132 * 8) / std::max<std::int64_t>(column_blocks, 1), 1,
                                                           std::min<std::int64_t>(rows, 1024));
      const std::int64_t rows_per_chunk = (rows + chunks - 1) / chunks;
      auto scratch = op_scratch::get(ctx, op, static_cast<std::size_t>(chunks * d) * sizeof(float));
      if (!scratch) return scratch.error();
      float* partial = reinterpret_cast<float*>(scratch->data());
      rmsnorm_dw_partial_kernel<S><<<dim3(static_cast<unsigned>(column_blocks), static_cast<unsigned>(chunks)), threads,
                                     0, stream>>>(x.as<const S>(), inv_rms.as<const float>(), dy.as<const S>(), rows, d,
                                                  rows_per_chunk, partial);
      TANDEM_RETURN_IF_ERROR(launch_status(op, "rmsnorm_dw_partial_kernel"));
      rmsnorm_dw_finish_kernel<S><<<static_cast<unsigned>(column_blocks), threads, 0, stream>>>(partial, chunks, d,
                                                                                                dw.as<S>());
      TANDEM_RETURN_IF_ERROR(launch_status(op, "rmsnorm_dw_finish_kernel"));
    }
    if (!dx.empty()) {
      rmsnorm_dx_kernel<S><<<static_cast<unsigned>(rows), row_threads, 0, stream>>>(
          x.as<const S>(), w.empty() ? nullptr : w.as<const S>(), inv_rms.as<const float>(), dy.as<const S>(), d,
          dx.as<S>(), accumulate_dx);
      TANDEM_RETURN_IF_ERROR(launch_status(op, "rmsnorm_dx_kernel"));
    }
    return status::ok();
  });
}

}  // namespace tandem::gpu::ops::cuda
