// CPU reference of packed causal attention: one query row at a time, scores and probabilities in
// the compute dtype, dot products and sums accumulated in double. The forward runs OpenMP over
// (token, head) rows; the backward over (sequence, kv head) pairs, each of which owns its dk / dv rows
// and the dq rows of its query heads, so no two threads write the same element.
#include "gpu/ops/cpu/attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <vector>

#include "gpu/ops/cpu/attention_row.h"
#include "gpu/ops/cpu/parallel.h"

namespace tandem::gpu::ops::cpu {
namespace {

/// The first key a query at token t sees: its sequence's first token, or with a window W > 0 the
/// later of that and t - W + 1.
std::int64_t first_visible(std::int64_t sequence_start, std::int64_t t, std::int64_t window) {
  return window > 0 ? std::max(sequence_start, t - window + 1) : sequence_start;
}

std::size_t aligned(std::size_t bytes) { return (bytes + 63) / 64 * 64; }

}  // namespace

// Forward, per thread: the visible keys' scores (T [longest]), then the output accumulator
// (double [d]).
template <class T>
attention_scratch_plan attention_forward_scratch(const attention_dims& dims) {
  const std::size_t keys = static_cast<std::size_t>(std::max<std::int64_t>(dims.longest, 1));
  return {omp_get_max_threads(), aligned(keys * sizeof(T)) + aligned(static_cast<std::size_t>(dims.head_dim) * sizeof(double))};
}

// Backward, per thread: p and dp (double [longest] each), dk and dv of one sequence's rows
// (double [longest, d] each), dq of one row (double [d]).
template <class T>
attention_scratch_plan attention_backward_scratch(const attention_dims& dims) {
  const auto n = static_cast<std::size_t>(std::max<std::int64_t>(dims.longest, 1));
  const auto d = static_cast<std::size_t>(dims.head_dim);
  return {omp_get_max_threads(), 2 * aligned(n * sizeof(double)) + 2 * aligned(n * d * sizeof(double)) + aligned(d * sizeof(double))};
}

template <class T>
void attention_forward(const T* q, const T* k, const T* v, const std::int32_t* cu_seqlens, const attention_dims& dims,
                       double scaling, std::int64_t window, T* out, T* lse, const attention_scratch_plan& plan,
                       std::byte* scratch) {
  const std::int64_t heads = dims.heads, kv_heads = dims.kv_heads, d = dims.head_dim;
  const std::int64_t group = heads / kv_heads;
  std::vector<std::int64_t> start(static_cast<std::size_t>(dims.tokens));  // first token of each token's sequence
  for (std::int64_t s = 0; s < dims.num_seqs; ++s)
    for (std::int64_t t = cu_seqlens[s]; t < cu_seqlens[s + 1]; ++t) start[static_cast<std::size_t>(t)] = cu_seqlens[s];
  const std::int64_t rows = dims.tokens * heads;
#pragma omp parallel num_threads(plan.threads) if (parallel_worth(rows * std::max<std::int64_t>(dims.longest, 1) * d))
  {
    std::byte* mine = scratch + static_cast<std::size_t>(omp_get_thread_num()) * plan.stride;
    T* const e = reinterpret_cast<T*>(mine);  // scores, then exp(score - max), of the visible keys
    double* const acc = reinterpret_cast<double*>(mine + aligned(static_cast<std::size_t>(std::max<std::int64_t>(dims.longest, 1)) * sizeof(T)));
#pragma omp for schedule(dynamic, 16)
    for (std::int64_t row = 0; row < rows; ++row) {
      const std::int64_t t = row / heads, g = row % heads / group;
      const std::int64_t first = first_visible(start[static_cast<std::size_t>(t)], t, window);
      attend_row(q + row * d, first, t, [&](std::int64_t j) { return k + (j * kv_heads + g) * d; },
                 [&](std::int64_t j) { return v + (j * kv_heads + g) * d; }, d, scaling, e, acc, out + row * d, lse + row);
    }
  }
}

template <class T>
void attention_backward(const T* q, const T* k, const T* v, const std::int32_t* cu_seqlens, const attention_dims& dims,
                        double scaling, std::int64_t window, const T* lse, const T* dout, T* dq, T* dk, T* dv,
                        bool accumulate_dq, const attention_scratch_plan& plan, std::byte* scratch) {
  const std::int64_t heads = dims.heads, kv_heads = dims.kv_heads, d = dims.head_dim;
  const std::int64_t group = heads / kv_heads;
  const std::int64_t pairs = dims.num_seqs * kv_heads;
  const auto at = [](std::int64_t i) { return static_cast<std::size_t>(i); };
  const std::size_t n_max = static_cast<std::size_t>(std::max<std::int64_t>(dims.longest, 1));
#pragma omp parallel num_threads(plan.threads) if (parallel_worth(dims.tokens * heads * static_cast<std::int64_t>(n_max) * d))
  {
    std::byte* mine = scratch + static_cast<std::size_t>(omp_get_thread_num()) * plan.stride;
    const auto take = [&mine](std::size_t count) {
      auto* out = reinterpret_cast<double*>(mine);
      mine += aligned(count * sizeof(double));
      return out;
    };
    double* const p = take(n_max);
    double* const dp = take(n_max);
    double* const dk_base = take(n_max * at(d));
    double* const dv_base = take(n_max * at(d));
    const std::span<double> dq_acc(take(at(d)), at(d));
#pragma omp for schedule(dynamic)
    for (std::int64_t pair = 0; pair < pairs; ++pair) {
      const std::int64_t s = pair / kv_heads, g = pair % kv_heads;
      const std::int64_t begin = cu_seqlens[s], end = cu_seqlens[s + 1];
      if (begin == end) continue;
      const std::span<double> dk_acc(dk_base, at((end - begin) * d)), dv_acc(dv_base, at((end - begin) * d));
      std::fill(dk_acc.begin(), dk_acc.end(), 0.0);  // this sequence's rows of kv head g, in double
      std::fill(dv_acc.begin(), dv_acc.end(), 0.0);
      for (std::int64_t h = g * group; h < (g + 1) * group; ++h) {
        for (std::int64_t t = begin; t < end; ++t) {
          const std::int64_t row = t * heads + h;
          const std::int64_t first = first_visible(begin, t, window);
          const T* qi = q + row * d;
          const T* doi = dout + row * d;
          double delta = 0;  // Σ_j p_j dp_j, the softmax backward's row term
          for (std::int64_t j = first; j <= t; ++j) {
            const T sc = score(qi, k + (j * kv_heads + g) * d, d, scaling);
            const T pj = std::exp(sc - lse[row]);
            p[at(j - first)] = static_cast<double>(pj);
            dp[at(j - first)] = dot(doi, v + (j * kv_heads + g) * d, d);
            delta += p[at(j - first)] * dp[at(j - first)];
          }
          std::fill(dq_acc.begin(), dq_acc.end(), 0.0);
          for (std::int64_t j = first; j <= t; ++j) {
            const double pj = p[at(j - first)];
            const double ds = pj * (dp[at(j - first)] - delta);  // dL/d(score_ij)
            const T* kj = k + (j * kv_heads + g) * d;
            double* dkj = dk_acc.data() + (j - begin) * d;
            double* dvj = dv_acc.data() + (j - begin) * d;
            for (std::int64_t c = 0; c < d; ++c) {
              dq_acc[at(c)] += ds * static_cast<double>(kj[c]);
              dkj[c] += scaling * ds * static_cast<double>(qi[c]);
              dvj[c] += pj * static_cast<double>(doi[c]);
            }
          }
          for (std::int64_t c = 0; c < d; ++c) {
            const double base = accumulate_dq ? static_cast<double>(dq[row * d + c]) : 0.0;
            dq[row * d + c] = static_cast<T>(base + scaling * dq_acc[at(c)]);
          }
        }
      }
      for (std::int64_t t = begin; t < end; ++t) {
        T* dkt = dk + (t * kv_heads + g) * d;
        T* dvt = dv + (t * kv_heads + g) * d;
        const double* dka = dk_acc.data() + (t - begin) * d;
        const double* dva = dv_acc.data() + (t - begin) * d;
        for (std::int64_t c = 0; c < d; ++c) {
          dkt[c] = static_cast<T>(static_cast<double>(dkt[c]) + dka[c]);
          dvt[c] = static_cast<T>(static_cast<double>(dvt[c]) + dva[c]);
        }
      }
    }
  }
}

template attention_scratch_plan attention_forward_scratch<float>(const attention_dims&);
template attention_scratch_plan attention_forward_scratch<double>(const attention_dims&);
template attention_scratch_plan attention_backward_scratch<float>(const attention_dims&);
template attention_scratch_plan attention_backward_scratch<double>(const attention_dims&);
template void attention_forward<float>(const float*, const float*, const float*, const std::int32_t*,
                                       const attention_dims&, double, std::int64_t, float*, float*,
                                       const attention_scratch_plan&, std::byte*);
template void attention_forward<double>(const double*, const double*, const double*, const std::int32_t*,
                                        const attention_dims&, double, std::int64_t, double*, double*,
                                        const attention_scratch_plan&, std::byte*);
template void attention_backward<float>(const float*, const float*, const float*, const std::int32_t*,
                                        const attention_dims&, double, std::int64_t, const float*, const float*, float*,
                                        float*, float*, bool, const attention_scratch_plan&, std::byte*);
template void attention_backward<double>(const double*, const double*, const double*, const std::int32_t*,
                                         const attention_dims&, double, std::int64_t, const double*, const double*,
                                         double*, double*, double*, bool, const attention_scratch_plan&, std::byte*);

}  // namespace tandem::gpu::ops::cpu
