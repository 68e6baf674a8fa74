// The top-k path of filter_row over a row's candidates in shared memory (nvcc only; private to
// token_filter_row.cuh and sampling.cu). With top-k, top_k_floor finds a key that at least k
// tokens reach and counts them; when they are few (at most candidate_capacity: with top-k 50 over
// 262,144 logits, a few hundred), one more pass gathers them into shared memory and everything
// after works on that list instead of the row: the top-k cut, the top-p cut over the top-k set,
// S = Σ_P e_j (and Σ_P e_j d_j) and, in the sampler, the draw. The histogram path
// (token_filter.cuh: select_cut, three passes over the row and more for top-p, then a pass for S
// and two for the draw) stays for rows whose candidates do not fit.
//
// The cuts are those of the definition (gpu/ops/logprobs.h), found by sorting instead of
// histograms: candidates sorted by rank (key descending, then id ascending), top-k keeps the first
// k, top-p the first whose inclusive fixed-point mass (the histogram path's integers) reaches
// ceil(top_p · total). S and Σ e_j d_j are summed in double in one fixed order (rank order, a
// thread's consecutive entries, then the block tree): the scorer (logprobs.cu) and the sampler
// call the same filter_row on the same row, take the same path, and get the same bits. The draw
// sorts the kept tokens by id and walks them in ascending id order, as the row path does.
#pragma once

#include <cstdint>

#include "gpu/ops/cuda/token_filter.cuh"

namespace tandem::gpu::ops::cuda::filter {

/// Candidates a block gathers at most: 8-byte ranking codes in the count bins' shared memory
/// (bins::count, 32 KiB; the histogram path, which uses them, is not taken then).
constexpr int candidate_capacity = 4096;
static_assert(candidate_capacity * sizeof(unsigned long long) <= max_bins * sizeof(std::uint32_t),
              "the candidates fit in the count bins");

__device__ __forceinline__ unsigned long long* candidates_of(bins b) {
  return reinterpret_cast<unsigned long long*>(b.count);
}

/// Ranking code of token j of key `key`: a larger code is ranked first (larger key, then lower id).
__device__ __forceinline__ unsigned long long rank_code(std::uint32_t key, std::int64_t j) {
  return (static_cast<unsigned long long>(key) << 32) | (0xffffffffu - static_cast<std::uint32_t>(j));
}
__device__ __forceinline__ std::uint32_t code_key(unsigned long long c) { return static_cast<std::uint32_t>(c >> 32); }
__device__ __forceinline__ std::int32_t code_id(unsigned long long c) {
  return static_cast<std::int32_t>(0xffffffffu - static_cast<std::uint32_t>(c));
}

/// The least power of two >= n (1 for n <= 1).
__device__ __forceinline__ int pow2_at_least(int n) {
  int p = 1;
  while (p < n) p <<= 1;
  return p;
}

/// Bitonic sort of c[0..n) in shared memory (n a power of two), descending or ascending; every
/// thread of the block calls it.
__device__ __forceinline__ void bitonic_sort(unsigned long long* c, int n, bool descending) {
  for (int k = 2; k <= n; k <<= 1) {
    for (int j = k >> 1; j > 0; j >>= 1) {
      for (int i = static_cast<int>(threadIdx.x); i < n; i += static_cast<int>(blockDim.x)) {
        const int l = i ^ j;
        if (l <= i) continue;
        const unsigned long long a = c[i], b = c[l];
        const bool ascending_pair = ((i & k) == 0) != descending;
        if (ascending_pair ? a > b : a < b) {
          c[i] = b;
          c[l] = a;
        }
      }
      __syncthreads();
    }
  }
}

/// The `count` tokens of key >= floor (top_k_floor counted them: count <= candidate_capacity) as
/// ranking codes in c[0..count), sorted by rank; c[count..pow2) zeros. Every thread returns after
/// a barrier.
template <class S>
__device__ void gather_candidates(const S* x, std::int64_t v, std::uint32_t floor, int count, unsigned long long* c,
                                  scratch& sh) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  if (threadIdx.x == 0) sh.gathered = 0;
  __syncthreads();
  row_loop(x, v, [&](std::int64_t j, float xv, bool valid) {
    const std::uint32_t key = rank_key(xv);
    const bool take = valid && key >= floor;
    const unsigned mask = __ballot_sync(0xffffffffu, take);
    if (mask == 0) return;
    const int leader = __ffs(mask) - 1;
    int base = 0;
    if (lane == leader) base = atomicAdd(&sh.gathered, __popc(mask));  // slots in any order: sorted below
    base = __shfl_sync(0xffffffffu, base, leader);
    if (take) c[base + __popc(mask & ((1u << lane) - 1u))] = rank_code(key, j);
  });
  __syncthreads();
  const int n = pow2_at_least(count);
  for (int i = count + static_cast<int>(threadIdx.x); i < n; i += static_cast<int>(blockDim.x)) c[i] = 0;
  __syncthreads();
  bitonic_sort(c, n, true);
}

/// sh.row's cuts, S, log S and (weighted) Σ_P e_j d_j from the rank-sorted candidates c[0..count)
/// (count >= top_k): P = the first top_k, then with top-p the first of those whose inclusive mass
/// reaches the target. Sets sh.row.kept_count. Every thread returns after a barrier.
inline __device__ void cut_candidates(const unsigned long long* c, int count, std::int64_t v, const params& p, scratch& sh,
                               bool weighted) {
  const int tid = static_cast<int>(threadIdx.x), threads = static_cast<int>(blockDim.x);
  int kept = p.top_k < count ? p.top_k : count;
  if (p.use_p) {  // a thread takes consecutive entries; masses are integers: any order is exact
    const int fbits = mass_bits(v);
    const float scale = __int_as_float((127 + fbits) << 23);  // 2^fbits, exact
    const int per = (kept + threads - 1) / threads, begin = tid * per, end = begin + per < kept ? begin + per : kept;
    if (tid == 0) sh.gathered = kept;  // (the target is at most the total: some thread replaces it)
    unsigned long long local = 0;
    for (int i = begin; i < end; ++i) local += mass_of(token_weight(sh.row, key_value(code_key(c[i]))), scale);
    unsigned long long total = 0;
    const unsigned long long before = block_exclusive_u64(local, sh.red_u, total);
    const double t = ceil(p.top_p * static_cast<double>(total));
    unsigned long long target = t < 1.0 ? 1ull : static_cast<unsigned long long>(t);
    if (target > total) target = total;
    if (before < target && before + local >= target) {
      unsigned long long acc = before;
      for (int i = begin; i < end; ++i) {
        acc += mass_of(token_weight(sh.row, key_value(code_key(c[i]))), scale);
        if (acc >= target) {
          sh.gathered = i + 1;
          break;
        }
      }
    }
    __syncthreads();
    kept = sh.gathered;
  }
  double sum = 0.0, wsum = 0.0;
  {
    const int per = (kept + threads - 1) / threads, begin = tid * per, end = begin + per < kept ? begin + per : kept;
    for (int i = begin; i < end; ++i) {
      const float xv = key_value(code_key(c[i]));
      const double e = static_cast<double>(token_weight(sh.row, xv));
      sum += e;
      if (weighted) wsum += e * static_cast<double>(scaled_logit(sh.row, xv));
    }
  }
  sum = block_sum_d(sum, sh.red_d);
  if (weighted) wsum = block_sum_d(wsum, sh.red_d);
  if (tid == 0) {
    sh.row.all_kept = false;
    sh.row.cut_key = code_key(c[kept - 1]);
    sh.row.cut_id = code_id(c[kept - 1]);
    sh.row.kept_count = kept;
    sh.row.sum = sum;
    sh.row.log_sum = log(sum);
    sh.row.weighted = wsum;
  }
  __syncthreads();
}

/// The token of the inverse CDF at u over the kept candidates (c[0..kept) by rank, from
/// cut_candidates) in ascending id order: c_j = the double sum of e_i / S over the kept ids i <= j
/// (warp 0, 32 ids a step, a warp scan each); the first j with u < c_j, the last kept id when
/// rounding leaves c below u everywhere. Reorders c. Every thread returns after a barrier.
inline __device__ std::int64_t draw_candidates(unsigned long long* c, double u, scratch& sh) {
  const row_state& row = sh.row;
  const int kept = row.kept_count, n = pow2_at_least(kept);
  for (int i = static_cast<int>(threadIdx.x); i < n; i += static_cast<int>(blockDim.x))  // id-major codes
    c[i] = i < kept ? (static_cast<unsigned long long>(static_cast<std::uint32_t>(code_id(c[i]))) << 32) | code_key(c[i])
                    : ~0ull;
  __syncthreads();
  bitonic_sort(c, n, false);
  if (threadIdx.x < 32) {
    const int lane = static_cast<int>(threadIdx.x);
    double run = 0.0;
    std::int64_t token = static_cast<std::int64_t>(c[kept - 1] >> 32);
    for (int base = 0; base < kept; base += 32) {
      const int i = base + lane;
      const double p = i < kept ? static_cast<double>(token_weight(row, key_value(static_cast<std::uint32_t>(c[i])))) / row.sum
                                : 0.0;
      const double incl = warp_inclusive_d(p);
      const unsigned hit = __ballot_sync(0xffffffffu, i < kept && u < run + incl);
      if (hit) {
        token = static_cast<std::int64_t>(c[base + __ffs(hit) - 1] >> 32);
        break;
      }
      run += __shfl_sync(0xffffffffu, incl, 31);
    }
    if (lane == 0) sh.found = static_cast<std::int32_t>(token);
  }
  __syncthreads();
  return sh.found;
}

}  // namespace tandem::gpu::ops::cuda::filter
