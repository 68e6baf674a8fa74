// filter_row: the steps of sampling_params over one row of logits on CUDA, one block of
// row_threads per row (nvcc only; private to logprobs.cu and sampling.cu, which both call it, so a
// sampled token's logprob and its score are the same bits): the maximum and first-ranked token,
// then with top-k the candidates at or above a floor, gathered in shared memory when they fit
// (token_candidates.cuh) or else cut by histograms over the row (token_filter.cuh's select_cut),
// then top-p, then S. Without top-k and top-p, token_filter.cuh's one-pass unfiltered_row.
#pragma once

#include <cstdint>

#include "gpu/ops/cuda/token_candidates.cuh"
#include "gpu/ops/cuda/token_filter.cuh"

namespace tandem::gpu::ops::cuda::filter {

/// Floors below the row maximum (sh.row.x_max) tried by top_k_floor, in logit units.
constexpr int floor_count = 7;
__host__ __device__ constexpr float floor_depth(int i) { return 0.25f * static_cast<float>(1 << i); }  // 0.25 .. 16

/// A floor of top_k_floor: a key and how many of the row's tokens reach it.
struct key_floor {
  std::uint32_t key;
  std::int64_t count;
};

/// The highest key among rank_key(x_max - floor_depth(i)) that at least k tokens reach, with their
/// count (key 0, every token, when none is): a lower bound of the k-th ranked token's key, so the
/// top-k cut among the tokens at or above it is the cut among all. Counts in registers, one pass,
/// no atomics.
template <class S>
__device__ key_floor top_k_floor(const S* x, std::int64_t v, scratch& sh, std::uint32_t k) {
  std::uint32_t keys[floor_count];
#pragma unroll
  for (int i = 0; i < floor_count; ++i) keys[i] = rank_key(sh.row.x_max - floor_depth(i));
  std::uint32_t counts[floor_count] = {};
  row_loop(x, v, [&](std::int64_t, float xv, bool valid) {
    const std::uint32_t key = rank_key(xv);
#pragma unroll
    for (int i = 0; i < floor_count; ++i) counts[i] += valid && key >= keys[i] ? 1u : 0u;
  });
  if (threadIdx.x < floor_count) sh.red_u[threadIdx.x] = 0;
  __syncthreads();
#pragma unroll
  for (int i = 0; i < floor_count; ++i) {
    const unsigned long long in_warp = warp_sum_u64(counts[i]);
    if ((threadIdx.x & 31) == 0) atomicAdd(&sh.red_u[i], in_warp);
  }
  __syncthreads();
  key_floor floor{0, v};
  for (int i = floor_count - 1; i >= 0; --i)  // deepest first: the last that holds is the highest
    if (sh.red_u[i] >= k) floor = key_floor{keys[i], static_cast<std::int64_t>(sh.red_u[i])};
  __syncthreads();
  return floor;
}

/// Fills sh.row for row x[0..v) (the steps of sampling_params): the maximum and first-ranked
/// token, the top-k cut, the top-p cut, S and log S, and with `weighted` sum_P e_j d_j. Every
/// thread returns after a barrier; when a logit is not finite only sh.row.finite (false) is set.
/// Without top-k and top-p, unfiltered_row's single pass, the first-ranked token only with
/// `argmax`.
template <class S>
__device__ void filter_row(const S* x, std::int64_t v, const params& p, bins b, scratch& sh, bool weighted,
                           bool argmax = true) {
  if (!p.use_k && !p.use_p) {
    unfiltered_row(x, v, p, sh, weighted, argmax);
    return;
  }
  const int tid = threadIdx.x;
  // 1. The maximum and the first-ranked token: the largest (key, -id).
  unsigned long long best = 0;
  bool finite = true;
  row_loop(x, v, [&](std::int64_t j, float xv, bool valid) {
    if (!valid) return;
    finite = finite && isfinite(xv);
    const unsigned long long c =
        (static_cast<unsigned long long>(rank_key(xv)) << 32) | (0xffffffffu - static_cast<std::uint32_t>(j));
    best = c > best ? c : best;
  });
  finite = __syncthreads_and(finite) != 0;
  best = block_max_u64(best, sh.red_u);
  if (tid == 0) {
    sh.row.temperature = p.temperature;
    sh.row.exp2_scale = p.exp2_scale;
    sh.row.finite = finite;
    sh.row.x_max = key_value(static_cast<std::uint32_t>(best >> 32));
    sh.row.argmax = static_cast<std::int32_t>(0xffffffffu - static_cast<std::uint32_t>(best));
    sh.row.all_kept = true;
    sh.row.cut_key = 0;
    sh.row.cut_id = 0;
    sh.row.kept_count = 0;
  }
  __syncthreads();
  if (!finite) return;
  // 2. Top-k: the top_k-th ranked token. Only tokens at or above a floor that at least top_k
  // tokens reach can be it. When they fit in shared memory they are gathered there and the rest
  // works on them (token_candidates.cuh); else the histograms see those alone (at the first level
  // every token would otherwise hit a few hot bins of shared memory).
  if (p.use_k) {
    const key_floor floor = top_k_floor(x, v, sh, static_cast<std::uint32_t>(p.top_k));
    if (floor.count <= candidate_capacity) {
      const int count = static_cast<int>(floor.count);
      gather_candidates(x, v, floor.key, count, candidates_of(b), sh);
      cut_candidates(candidates_of(b), count, v, p, sh, weighted);
      return;
    }
    select_cut(x, v, b, sh, [floor = floor.key](std::uint32_t key, std::int64_t) { return key >= floor; }, false,
               static_cast<unsigned long long>(p.top_k), 1.0);
    if (tid == 0) sh.row.all_kept = false;
    __syncthreads();
  }
  // 3. Top-p over K: the eligible tokens are those top-k keeps (all without top-k).
  if (p.use_p) {
    const bool all = sh.row.all_kept;
    const std::uint32_t k_key = sh.row.cut_key;
    const std::int32_t k_id = sh.row.cut_id;
    select_cut(x, v, b, sh,
               [=](std::uint32_t key, std::int64_t j) { return all || key > k_key || (key == k_key && j <= k_id); },
               true, 0, p.top_p);
    if (tid == 0) sh.row.all_kept = false;
    __syncthreads();
  }
  // 4. S (and sum e_j d_j) over P.
  double sum = 0.0, wsum = 0.0;
  const row_state& row = sh.row;
  row_loop(x, v, [&](std::int64_t j, float xv, bool valid) {
    if (!valid || !is_kept(row, rank_key(xv), j)) return;
    const float d = scaled_logit(row, xv);
    const double e = static_cast<double>(token_weight(row, xv));
    sum += e;
    if (weighted) wsum += e * static_cast<double>(d);
  });
  sum = block_sum_d(sum, sh.red_d);
  if (weighted) wsum = block_sum_d(wsum, sh.red_d);
  if (tid == 0) {
    sh.row.sum = sum;
    sh.row.log_sum = log(sum);
    sh.row.weighted = wsum;
  }
  __syncthreads();
}

}  // namespace tandem::gpu::ops::cuda::filter
