// Temperature, top-k and top-p of one row of logits on CUDA (the definition in gpu/ops/logprobs.h,
// sampling_params), one block of row_threads per row: the pieces of filter_row
// (token_filter_row.cuh), the one device implementation that the CUDA scorer (logprobs.cu) and
// the CUDA sampler (sampling.cu) both call, so a sampled token's logprob and its score are the
// same bits (nvcc only). What follows is the path over the whole row; with top-k, filter_row first
// tries the path over the row's candidates in shared memory (token_candidates.cuh).
//
// The ranking is that of a 32-bit order key of each logit (larger key = larger logit, -0 and +0
// one key), ties broken by the lower id. A ranking prefix (the top-k set K, the top-p set P) is
// found without sorting: the first token in ranking order whose inclusive weight reaches a
// target (weight 1 for top-k: the k-th token; for top-p the mass e_j in 2^-F fixed point, so
// every sum is an exact integer, independent of the order the block adds it in) is located by
// three histogram passes over the key's digits (13, 10 and 9 bits, shared-memory integer
// atomics, warp-aggregated when a warp hits one bin), then among equal keys by id. The weights
// e_j = 2^((x_j - x_max) · log2(e) / T) are one float32 ex2 each (token_weight: S, the top-p
// masses, the sampler's draw and the gradient use the same formula); sums of e_j (S, the
// entropy) are accumulated in double by a fixed block tree (without top-k / top-p: float32 over
// a thread's batch of 4 chunks, then double). Traversal: thread t holds chunks t, t + blockDim,
// ... of 16 bytes of the row whether or not the row is 16-byte aligned (vector loads when it is,
// the next batch loaded ahead), so every sum has one order per shape.
#pragma once

#include <cuda_bf16.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "gpu/core/cuda/check.h"
#include "gpu/core/status.h"
#include "gpu/ops/cuda/device_math.cuh"
#include "gpu/ops/logprobs.h"

namespace tandem::gpu::ops::cuda::filter {

constexpr int row_threads = 512;
constexpr int row_warps = row_threads / 32;

/// The histogram levels: digit bits and shift of the key per pass (13 + 10 + 9 = 32).
__host__ __device__ constexpr int level_bits(int level) { return level == 0 ? 13 : level == 1 ? 10 : 9; }
__host__ __device__ constexpr int level_shift(int level) { return level == 0 ? 19 : level == 1 ? 9 : 0; }
constexpr int max_bins = 1 << 13;

/// Dynamic shared memory a filter kernel needs: none without top-k / top-p, the count and id
/// bins with top-k, and the mass bins too with top-p.
inline std::size_t dynamic_bytes(bool use_k, bool use_p) {
  if (!use_k && !use_p) return 0;
  return (use_p ? max_bins * sizeof(unsigned long long) : 0) + max_bins * sizeof(std::uint32_t) +
         (1 << level_bits(2)) * sizeof(std::uint32_t);
}

/// The sampling parameters as the kernels read them.
struct params {
  float temperature = 1.f;      ///< T in float32 (the scaled logits)
  float exp2_scale = 1.4426950408889634f;  ///< log2(e) / T in float32 (the weights e_j)
  double temperature_d = 1.0;   ///< T as given (the gradient's 1 / T)
  std::int32_t top_k = 0;
  double top_p = 1.0;
  bool use_k = false, use_p = false;
};

/// One row's filtered distribution, block-uniform (shared memory). The kept set P is a ranking
/// prefix, stored as its last token (cut_key, cut_id).
struct row_state {
  float temperature;
  float exp2_scale;      ///< log2(e) / T: e_j = 2^((x_j - x_max) · exp2_scale)
  float x_max;           ///< the row's largest logit
  std::int32_t argmax;   ///< the first-ranked token
  bool finite;           ///< every logit is finite (else nothing else is filled)
  bool all_kept;         ///< P = every token
  std::uint32_t cut_key;
  std::int32_t cut_id;
  double sum;            ///< S = sum_{j in P} e_j
  double log_sum;        ///< log(S)
  double weighted;       ///< sum_{j in P} e_j d_j (only when asked for)
  std::int32_t kept_count;  ///< > 0: P is the gathered candidates' first kept_count (token_candidates.cuh)
};

/// Block-shared scratch of the filter (static shared memory of the kernel).
struct scratch {
  row_state row;
  double red_d[32];
  unsigned long long red_u[32];
  std::int32_t red_i[32];
  std::uint32_t prefix;            ///< key digits chosen so far
  unsigned long long w_above;      ///< weight of the eligible tokens ranked before the current bin
  unsigned long long target;       ///< the weight the prefix must reach
  unsigned long long next_above;   ///< w_above of the crossing bin, before it is taken over
  std::uint32_t chosen;            ///< the digit of the crossing bin
  std::uint32_t chosen_minid;      ///< the lowest id in the last level's crossing bin
  std::int32_t tie_warp;
  unsigned long long tie_rank;
  std::int32_t found;
  int gathered;                    ///< candidates gathered so far, then the top-p cut's count
};

/// The dynamic shared bins.
struct bins {
  unsigned long long* mass;  ///< null without top-p
  std::uint32_t* count;
  std::uint32_t* minid;
};

__device__ __forceinline__ bins carve(unsigned char* dyn, bool use_p) {
  bins b;
  b.mass = use_p ? reinterpret_cast<unsigned long long*>(dyn) : nullptr;
  unsigned char* p = dyn + (use_p ? max_bins * sizeof(unsigned long long) : 0);
  b.count = reinterpret_cast<std::uint32_t*>(p);
  b.minid = b.count + max_bins;
  return b;
}

/// Lets `kernel` take `bytes` of dynamic shared memory (past the default 48 KiB).
template <class Kernel>
status allow_dynamic_shared(Kernel kernel, std::size_t bytes) {
  if (bytes > 48 * 1024)
    TANDEM_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  return status::ok();
}

/// The kernels' view of `p` for rows of v logits.
inline params make_params(const sampling_params& p, std::int64_t v) {
  params k;
  k.temperature = static_cast<float>(p.temperature);
  k.temperature_d = p.temperature;
  k.exp2_scale = static_cast<float>(1.4426950408889634 / p.temperature);
  k.top_k = p.top_k;
  k.top_p = p.top_p;
  k.use_k = p.top_k > 0 && p.top_k < v;
  k.use_p = p.top_p < 1.0;
  return k;
}

/// A double rounded once to the storage type (nearest even).
template <class O>
__device__ __forceinline__ O from_double(double v);
template <>
__device__ __forceinline__ float from_double<float>(double v) { return __double2float_rn(v); }
template <>
__device__ __forceinline__ bf16 from_double<bf16>(double v) { return __double2bfloat16(v); }

// ---------------------------------------------------------------------------------------------
// keys, weights, block reductions

/// Order key of a finite logit: a > b as floats iff key(a) > key(b); -0 and +0 share a key.
__device__ __forceinline__ std::uint32_t rank_key(float x) {
  const std::uint32_t u = __float_as_uint(x == 0.f ? 0.f : x);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/// The logit of a key (+0 for zero).
__device__ __forceinline__ float key_value(std::uint32_t k) {
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

/// (x - m) / T in float32; x - m when T = 1 (the same bits: a division by 1 is exact).
__device__ __forceinline__ float scaled_by(float x, float m, float t) { return t == 1.f ? x - m : (x - m) / t; }

/// d = (x - x_max) / T in float32.
__device__ __forceinline__ float scaled_logit(const row_state& row, float x) { return scaled_by(x, row.x_max, row.temperature); }

/// e = 2^((x - m) · log2(e) / T) ~ exp((x - m) / T) for a row maximum m: x - m is exact for
/// bfloat16 logits, one rounding of the product, one ex2 (no division, no expf).
__device__ __forceinline__ float weight_of(float x, float m, float exp2_scale) { return exp2_approx((x - m) * exp2_scale); }

/// e_j: the unnormalised probability entering S, the top-p masses and the gradient (one formula
/// for all of them).
__device__ __forceinline__ float token_weight(const row_state& row, float x) { return weight_of(x, row.x_max, row.exp2_scale); }

/// Whether the token of key `key` and id j is in P.
__device__ __forceinline__ bool is_kept(const row_state& row, std::uint32_t key, std::int64_t j) {
  return row.all_kept || key > row.cut_key || (key == row.cut_key && j <= row.cut_id);
}

/// logprob_j = d_j - log(S) in double for j in P, -infinity otherwise (the scorer and the sampler
/// round this same value).
__device__ __forceinline__ double token_logprob(const row_state& row, float x, std::int64_t j) {
  if (!is_kept(row, rank_key(x), j)) return -INFINITY;
  return static_cast<double>(scaled_logit(row, x)) - row.log_sum;
}

__device__ __forceinline__ double block_sum_d(double v, double* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  double total = lane < row_warps ? shared[lane] : 0.0;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) total += __shfl_xor_sync(0xffffffffu, total, offset);
  __syncthreads();
  return total;
}

/// Inclusive prefix sum over the lanes of a warp in double (the same tree on every call): the
/// running sums of the inverse-CDF draws.
__device__ __forceinline__ double warp_inclusive_d(double v) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int offset = 1; offset < 32; offset <<= 1) {
    const double t = __shfl_up_sync(0xffffffffu, v, offset);
    if (lane >= offset) v += t;
  }
  return v;
}

__device__ __forceinline__ unsigned long long warp_sum_u64(unsigned long long v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ unsigned long long block_max_u64(unsigned long long v, unsigned long long* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const unsigned long long o = __shfl_xor_sync(0xffffffffu, v, offset);
    v = o > v ? o : v;
  }
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  unsigned long long m = lane < row_warps ? shared[lane] : 0ull;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const unsigned long long o = __shfl_xor_sync(0xffffffffu, m, offset);
    m = o > m ? o : m;
  }
  __syncthreads();
  return m;
}

/// Exclusive prefix sum over thread order; `total` gets the block's sum. Integer: exact.
__device__ __forceinline__ unsigned long long block_exclusive_u64(unsigned long long v, unsigned long long* shared,
                                                                  unsigned long long& total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  unsigned long long incl = v;
#pragma unroll
  for (int offset = 1; offset < 32; offset <<= 1) {
    const unsigned long long t = __shfl_up_sync(0xffffffffu, incl, offset);
    if (lane >= offset) incl += t;
  }
  if (lane == 31) shared[warp] = incl;
  __syncthreads();
  unsigned long long before = 0, all = 0;
  for (int w = 0; w < row_warps; ++w) {
    before += w < warp ? shared[w] : 0ull;
    all += shared[w];
  }
  __syncthreads();
  total = all;
  return before + incl - v;
}

// ---------------------------------------------------------------------------------------------
// the row traversal

/// f(std::integral_constant<int, k>) for k = 0 .. n-1, unrolled at compile time (constant
/// indices keep the element arrays in registers).
template <int... k, class F>
__device__ __forceinline__ void unrolled(std::integer_sequence<int, k...>, F&& f) {
  (f(std::integral_constant<int, k>{}), ...);
}

/// Calls f(j, x_j, valid) for the row's elements, thread t taking 16-byte chunks t, t + blockDim,
/// ... in order; every lane of a warp makes the same calls (valid false past the end), so f may
/// use warp intrinsics over the full mask.

template <class S, class F>
__device__ __forceinline__ void row_loop(const S* row, std::int64_t v, F&& f) {
  constexpr int n = 16 / sizeof(S);
  const std::int64_t chunks = (v + n - 1) / n;
  const bool vec = reinterpret_cast<std::uintptr_t>(row) % 16 == 0 && v % n == 0;
  const int lane = threadIdx.x & 31;
  for (std::int64_t c = threadIdx.x; c - lane < chunks; c += blockDim.x) {
    const bool in = c < chunks;
    float xs[n];
    if (vec) {
      uint4 raw = make_uint4(0, 0, 0, 0);
      if (in) raw = __ldg(reinterpret_cast<const uint4*>(row) + c);
      const S* e = reinterpret_cast<const S*>(&raw);
      unrolled(std::make_integer_sequence<int, n>{}, [&](auto k) { xs[k] = to_float(e[k]); });
    } else {
      unrolled(std::make_integer_sequence<int, n>{}, [&](auto k) {
        const std::int64_t j = c * n + k;
        xs[k] = in && j < v ? to_float(row[j]) : 0.f;
      });
    }
    unrolled(std::make_integer_sequence<int, n>{}, [&](auto k) {
      const std::int64_t j = c * n + k;
      f(j, xs[k], in && j < v);
    });
  }
}

// ---------------------------------------------------------------------------------------------
// the selection of a ranking prefix

/// Fixed-point bits of a top-p mass: V tokens of at most 2^F each sum below 2^62.
__device__ __forceinline__ int mass_bits(std::int64_t v) {
  int log2v = 0;
  while ((std::int64_t{1} << log2v) < v) ++log2v;
  return 62 - log2v;
}

__device__ __forceinline__ unsigned long long mass_of(float e, float scale) { return __float2ull_rn(e * scale); }

/// Finds the cut of the ranking prefix over the tokens `eligible(key, j)` accepts: the first token
/// t in ranking order whose inclusive weight reaches the target. Weight 1 and target `count` (the
/// count-th eligible token), or (use_mass) the fixed-point mass and target ceil(top_p * total
/// eligible mass), i.e. the last token kept by "the mass ranked before it is < top_p * total".
/// Writes sh.row.cut_key / cut_id; every thread returns after a barrier.
template <class S, class Eligible>
__device__ void select_cut(const S* x, std::int64_t v, bins b, scratch& sh, Eligible eligible, bool use_mass,
                           unsigned long long count, double top_p) {
  const int tid = threadIdx.x, lane = tid & 31;
  const int fbits = mass_bits(v);
  const float scale = __int_as_float((127 + fbits) << 23);  // 2^fbits, exact
  if (tid == 0) {
    sh.prefix = 0;
    sh.w_above = 0;
    sh.target = count;
  }
  __syncthreads();
#pragma unroll 1
  for (int level = 0; level < 3; ++level) {
    const int bits = level_bits(level), shift = level_shift(level), nb = 1 << bits;
    for (int i = tid; i < nb; i += blockDim.x) {
      b.count[i] = 0;
      if (use_mass) b.mass[i] = 0;
      if (level == 2) b.minid[i] = 0xffffffffu;
    }
    __syncthreads();
    const std::uint32_t prefix = sh.prefix;
    const row_state& row = sh.row;
    row_loop(x, v, [&](std::int64_t j, float xv, bool valid) {
      const std::uint32_t key = rank_key(xv);
      const bool act = valid && (level == 0 || (key >> (shift + bits)) == prefix) && eligible(key, j);
      const std::uint32_t digit = (key >> shift) & static_cast<std::uint32_t>(nb - 1);
      const unsigned long long q = use_mass && act ? mass_of(token_weight(row, xv), scale) : 0ull;
      const unsigned active = __ballot_sync(0xffffffffu, act);
      if (active == 0) return;
      const int leader = __ffs(active) - 1;
      const std::uint32_t d0 = __shfl_sync(0xffffffffu, digit, leader);
      if (__all_sync(0xffffffffu, !act || digit == d0)) {
        const unsigned long long qs = use_mass ? warp_sum_u64(q) : 0ull;
        if (lane == leader) {  // the lowest active lane holds the lowest id
          atomicAdd(&b.count[d0], static_cast<std::uint32_t>(__popc(active)));
          if (use_mass) atomicAdd(&b.mass[d0], qs);
          if (level == 2) atomicMin(&b.minid[d0], static_cast<std::uint32_t>(j));
        }
      } else if (act) {
        atomicAdd(&b.count[digit], 1u);
        if (use_mass) atomicAdd(&b.mass[digit], q);
        if (level == 2) atomicMin(&b.minid[digit], static_cast<std::uint32_t>(j));
      }
    });
    __syncthreads();
    // The crossing bin, bins taken from the top digit down: thread t holds bins nb-1-t*per ...
    const int per = (nb + row_threads - 1) / row_threads;
    auto weight = [&](int bin) -> unsigned long long {
      return use_mass ? b.mass[bin] : static_cast<unsigned long long>(b.count[bin]);
    };
    unsigned long long local = 0;
    for (int i = 0; i < per; ++i) {
      const int bin = nb - 1 - (tid * per + i);
      if (bin >= 0) local += weight(bin);
    }
    unsigned long long total = 0;
    const unsigned long long before = block_exclusive_u64(local, sh.red_u, total);
    unsigned long long target = sh.target;
    if (level == 0 && use_mass) {
      const double t = ceil(top_p * static_cast<double>(total));
      target = t < 1.0 ? 1ull : static_cast<unsigned long long>(t);
      if (target > total) target = total;
    }
    const unsigned long long above = sh.w_above;
    if (above + before < target && above + before + local >= target) {
      unsigned long long acc = above + before;
      for (int i = 0; i < per; ++i) {
        const int bin = nb - 1 - (tid * per + i);
        if (bin < 0) break;
        const unsigned long long w = weight(bin);
        if (acc + w >= target) {
          sh.chosen = static_cast<std::uint32_t>(bin);
          sh.next_above = acc;
          if (level == 2) sh.chosen_minid = b.minid[bin];
          break;
        }
        acc += w;
      }
    }
    __syncthreads();
    if (tid == 0) {
      sh.prefix = (prefix << bits) | sh.chosen;
      sh.w_above = sh.next_above;
      sh.target = target;
    }
    __syncthreads();
  }
  // The key is fixed; among its eligible tokens (equal weights w), in id order, the n-th reaches
  // the target: n = ceil((target - above) / w).
  const std::uint32_t cut_key = sh.prefix;
  unsigned long long w = 1;
  if (use_mass) w = mass_of(token_weight(sh.row, key_value(cut_key)), scale);
  const unsigned long long need = (sh.target - sh.w_above + w - 1) / w;
  if (need <= 1) {
    if (tid == 0) {
      sh.row.cut_key = cut_key;
      sh.row.cut_id = static_cast<std::int32_t>(sh.chosen_minid);
    }
    __syncthreads();
    return;
  }
  // Ties: count them per warp over contiguous id segments, then the warp holding the need-th
  // walks its segment again.
  const int warp = tid >> 5;
  const std::int64_t seg = (v + row_warps - 1) / row_warps;
  const std::int64_t begin = warp * seg, end = begin + seg < v ? begin + seg : v;
  auto tie = [&](std::int64_t j) {
    if (j >= end) return false;
    const std::uint32_t key = rank_key(to_float(x[j]));
    return key == cut_key && eligible(key, j);
  };
  unsigned long long ties = 0;
  for (std::int64_t base = begin; base < end; base += 32) ties += __popc(__ballot_sync(0xffffffffu, tie(base + lane)));
  if (lane == 0) sh.red_u[warp] = ties;
  __syncthreads();
  if (tid == 0) {
    unsigned long long acc = 0;
    sh.tie_warp = row_warps - 1;
    sh.tie_rank = 1;
    for (int w2 = 0; w2 < row_warps; ++w2) {
      if (acc + sh.red_u[w2] >= need) {
        sh.tie_warp = w2;
        sh.tie_rank = need - acc;
        break;
      }
      acc += sh.red_u[w2];
    }
    sh.row.cut_key = cut_key;
    sh.row.cut_id = static_cast<std::int32_t>(sh.chosen_minid);
  }
  __syncthreads();
  if (warp == sh.tie_warp) {
    unsigned long long acc = 0;
    const unsigned long long rank = sh.tie_rank;
    for (std::int64_t base = begin; base < end; base += 32) {
      unsigned bal = __ballot_sync(0xffffffffu, tie(base + lane));
      const unsigned c = __popc(bal);
      if (acc + c >= rank) {
        for (unsigned long long r = acc + 1; r < rank; ++r) bal &= bal - 1;
        if (lane == 0) sh.row.cut_id = static_cast<std::int32_t>(base + __ffs(bal) - 1);
        break;
      }
      acc += c;
    }
  }
  __syncthreads();
}

// ---------------------------------------------------------------------------------------------
// the filter

/// Chunks of 16 bytes a thread takes at once in unfiltered_row (a batch); it loads the next
/// batch before it computes this one, so 2 · batch_chunks loads of 16 bytes are in flight.
constexpr int batch_chunks = 4;

/// The largest float over the block (every thread gets it); `shared` holds 32 doubles.
__device__ __forceinline__ float block_max_f(float v, double* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_max(v);
  if (lane == 0) shared[warp] = static_cast<double>(v);
  __syncthreads();
  float m = lane < row_warps ? static_cast<float>(shared[lane]) : -INFINITY;
  m = warp_max(m);
  __syncthreads();
  return m;
}

/// One thread's part of unfiltered_row: its running maximum m, s = sum e^((x - m) / T) and
/// ws = sum e^((x - m) / T) (x - m) / T over its tokens so far, whether they were all finite, and
/// the largest (key, -id).
struct online_sums {
  float m = -INFINITY;
  double s = 0.0, ws = 0.0;
  bool finite = true;
  unsigned long long best = 0;
};

/// A batch of NU chunks raw (16 bytes of storage S each, chunk u at index c0 + u · step;
/// `valid(u, k)` says which elements are in the row, hi and lo their largest and smallest value)
/// added to st: st.m raised to hi when larger (the sums rescaled by exp(delta) in double), then
/// per chunk the float sums of e = weight_of(x, m) and (with Weighted) e (x - m), the chunks' sums
/// added in chunk order in float, then to st.s (st.ws: times 1 / T) in double. The elements are
/// converted to float where they are used, so the batch stays 16 bytes per chunk in registers.
template <class S, int NU, bool Weighted, bool Argmax, class Valid>
__device__ __forceinline__ void add_batch(const uint4 (&raw)[NU], float hi, float lo, Valid valid, std::int64_t c0,
                                          std::int64_t step, float temp, float exp2_scale, double inv_t,
                                          online_sums& st) {
  constexpr int n = 16 / sizeof(S);
  // A NaN reaches st.s through its e; +-infinity are caught here.
  st.finite = st.finite && lo > -INFINITY && hi < INFINITY;
  if (hi > st.m) {
    if (st.s != 0.0) {  // s > 0 once any token is in: its own term is exp(0) = 1
      const float delta = scaled_by(st.m, hi, temp);
      const double a = exp(static_cast<double>(delta));
      if (Weighted) st.ws = __dmul_rn(a, __fma_rn(static_cast<double>(delta), st.s, st.ws));
      st.s = __dmul_rn(st.s, a);
    }
    st.m = hi;
  }
  const float m = st.m;
  float te = 0.f, tw = 0.f;
#pragma unroll
  for (int u = 0; u < NU; ++u) {
    S el[n];
    memcpy(el, &raw[u], sizeof el);
    float pe = 0.f, pw = 0.f;
#pragma unroll
    for (int k = 0; k < n; ++k) {
      const float xv = to_float(el[k]);
      const float dd = xv - m;  // -infinity past the end: e = 0
      const float e = exp2_approx(dd * exp2_scale);
      pe += e;
      if (Weighted && e != 0.f) pw = fmaf(e, dd, pw);
      if (Argmax && valid(u, k)) {
        const std::int64_t j = (c0 + u * step) * n + k;
        const unsigned long long key =
            (static_cast<unsigned long long>(rank_key(xv)) << 32) | (0xffffffffu - static_cast<std::uint32_t>(j));
        st.best = key > st.best ? key : st.best;
      }
    }
    te += pe;
    if (Weighted) tw += pw;
  }
  st.s = __dadd_rn(st.s, static_cast<double>(te));
  if (Weighted) st.ws = __fma_rn(static_cast<double>(tw), inv_t, st.ws);
}

/// Loads chunk c of a 16-byte-aligned row.
__device__ __forceinline__ uint4 load_chunk(const void* row, std::int64_t c) {
  return __ldg(reinterpret_cast<const uint4*>(row) + c);
}

/// The largest and smallest value of the chunks (bfloat16: by pairs).
template <class S, int NU>
__device__ __forceinline__ void batch_range(const uint4 (&raw)[NU], float& hi, float& lo) {
  if constexpr (std::is_same_v<S, bf16>) {
    __nv_bfloat162 h[NU][4];
    memcpy(h, raw, sizeof h);
    __nv_bfloat162 mx = h[0][0], mn = h[0][0];
#pragma unroll
    for (int u = 0; u < NU; ++u)
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        mx = __hmax2(mx, h[u][q]);
        mn = __hmin2(mn, h[u][q]);
      }
    hi = fmaxf(__low2float(mx), __high2float(mx));
    lo = fminf(__low2float(mn), __high2float(mn));
  } else {
    float f[NU][4];
    memcpy(f, raw, sizeof f);
    hi = -INFINITY;
    lo = INFINITY;
#pragma unroll
    for (int u = 0; u < NU; ++u)
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        hi = fmaxf(hi, f[u][k]);
        lo = fminf(lo, f[u][k]);
      }
  }
}

/// NU chunks from c0 by step of a row that is not 16-byte aligned or not a whole number of
/// chunks, by element loads, -infinity past the end (hi and lo over the row's elements only).
template <class S, int NU>
__device__ __forceinline__ void load_batch_scalar(const S* x, std::int64_t v, std::int64_t c0, std::int64_t step,
                                                  uint4 (&raw)[NU], float& hi, float& lo) {
  constexpr int n = 16 / sizeof(S);
  hi = -INFINITY;
  lo = INFINITY;
#pragma unroll
  for (int u = 0; u < NU; ++u) {
    S el[n];
#pragma unroll
    for (int k = 0; k < n; ++k) {
      const std::int64_t j = (c0 + u * step) * n + k;
      el[k] = from_float<S>(-INFINITY);
      if (j < v) {
        el[k] = x[j];
        hi = fmaxf(hi, to_float(el[k]));
        lo = fminf(lo, to_float(el[k]));  // a NaN reaches st.s through its e
      }
    }
    memcpy(&raw[u], el, sizeof el);
  }
}

/// One thread's chunks t, t + blockDim, ... in batches of batch_chunks (the whole batches, then
/// the last chunks one at a time), the same batches and float sums whether the row is 16-byte
/// aligned (vector loads, the next batch loaded ahead unless Argmax) or not (element loads).
template <class S, bool Weighted, bool Argmax>
__device__ __forceinline__ void row_sums(const S* x, std::int64_t v, const params& p, online_sums& st) {
  constexpr int n = 16 / sizeof(S), U = batch_chunks;
  const std::int64_t chunks = (v + n - 1) / n;
  const std::int64_t step = static_cast<std::int64_t>(blockDim.x);
  const bool vec = reinterpret_cast<std::uintptr_t>(x) % 16 == 0 && v % n == 0;
  const float temp = p.temperature, c2 = p.exp2_scale;
  const double inv_t = 1.0 / p.temperature_d;
  std::int64_t c0 = threadIdx.x;
  const auto all = [](int, int) { return true; };
  if (vec) {
    uint4 next[U];
    if (!Argmax && c0 + (U - 1) * step < chunks) {
#pragma unroll
      for (int u = 0; u < U; ++u) next[u] = load_chunk(x, c0 + u * step);
    }
    for (; c0 + (U - 1) * step < chunks; c0 += U * step) {
      uint4 cur[U];
      if constexpr (Argmax) {  // the key search needs the registers: no batch loaded ahead
#pragma unroll
        for (int u = 0; u < U; ++u) cur[u] = load_chunk(x, c0 + u * step);
      } else {
#pragma unroll
        for (int u = 0; u < U; ++u) cur[u] = next[u];
        const std::int64_t c1 = c0 + U * step;
        if (c1 + (U - 1) * step < chunks) {
#pragma unroll
          for (int u = 0; u < U; ++u) next[u] = load_chunk(x, c1 + u * step);
        }
      }
      float hi, lo;
      batch_range<S, U>(cur, hi, lo);
      add_batch<S, U, Weighted, Argmax>(cur, hi, lo, all, c0, step, temp, c2, inv_t, st);
    }
    for (; c0 < chunks; c0 += step) {
      const uint4 one[1] = {load_chunk(x, c0)};
      float hi, lo;
      batch_range<S, 1>(one, hi, lo);
      add_batch<S, 1, Weighted, Argmax>(one, hi, lo, all, c0, step, temp, c2, inv_t, st);
    }
  } else {
    for (; c0 + (U - 1) * step < chunks; c0 += U * step) {
      uint4 raw[U];
      float hi, lo;
      load_batch_scalar<S, U>(x, v, c0, step, raw, hi, lo);
      add_batch<S, U, Weighted, Argmax>(
          raw, hi, lo, [&](int u, int k) { return (c0 + u * step) * n + k < v; }, c0, step, temp, c2, inv_t, st);
    }
    for (; c0 < chunks; c0 += step) {
      uint4 raw[1];
      float hi, lo;
      load_batch_scalar<S, 1>(x, v, c0, step, raw, hi, lo);
      add_batch<S, 1, Weighted, Argmax>(
          raw, hi, lo, [&](int, int k) { return c0 * n + k < v; }, c0, step, temp, c2, inv_t, st);
    }
  }
  st.finite = st.finite && !isnan(st.s);
}

/// filter_row without top-k and top-p (P = every token): the maximum, S and sum e_j d_j in ONE
/// pass over the row (row_sums): each thread keeps its running maximum m_t and its sums relative
/// to it, rescaling them by exp(delta) (double) when a batch raises m_t by delta / T; the block
/// then rescales every thread's sums to the row's maximum and adds them by the fixed tree. One
/// order per shape: the scorer and the sampler get the same bits. With `argmax` also the
/// first-ranked token. Per element: a subtraction, a multiplication, one ex2, an addition (and a
/// fused multiply-add for the entropy); double arithmetic once per batch.
template <class S>
__device__ void unfiltered_row(const S* x, std::int64_t v, const params& p, scratch& sh, bool weighted, bool argmax) {
  const int tid = threadIdx.x;
  const float temp = p.temperature;
  online_sums t;
  if (weighted) {
    if (argmax) row_sums<S, true, true>(x, v, p, t);
    else row_sums<S, true, false>(x, v, p, t);
  } else {
    if (argmax) row_sums<S, false, true>(x, v, p, t);
    else row_sums<S, false, false>(x, v, p, t);
  }
  const bool finite = __syncthreads_and(t.finite) != 0;
  float x_max = block_max_f(t.m, sh.red_d);
  if (x_max == 0.f) x_max = 0.f;  // +0
  unsigned long long best = 0;
  if (argmax) best = block_max_u64(t.best, sh.red_u);
  double st = 0.0, wt = 0.0;
  if (finite && t.s != 0.0) {
    const float delta = scaled_by(t.m, x_max, temp);
    const double a = exp(static_cast<double>(delta));
    st = __dmul_rn(t.s, a);
    if (weighted) wt = __dmul_rn(a, __fma_rn(static_cast<double>(delta), t.s, t.ws));
  }
  const double sum = block_sum_d(st, sh.red_d);
  const double wsum = weighted ? block_sum_d(wt, sh.red_d) : 0.0;
  if (tid == 0) {
    sh.row.temperature = temp;
    sh.row.exp2_scale = p.exp2_scale;
    sh.row.finite = finite;
    sh.row.x_max = x_max;
    sh.row.argmax = argmax ? static_cast<std::int32_t>(0xffffffffu - static_cast<std::uint32_t>(best)) : 0;
    sh.row.all_kept = true;
    sh.row.kept_count = 0;
    sh.row.cut_key = 0;
    sh.row.cut_id = 0;
    sh.row.sum = sum;
    sh.row.log_sum = log(sum);
    sh.row.weighted = wsum;
  }
  __syncthreads();
}

}  // namespace tandem::gpu::ops::cuda::filter
