// CPU reference of packed causal attention: one query row at a time, scores and probabilities in
// the compute dtype, dot products and sums accumulated in double. The forward runs OpenMP over
// (token, head) rows; the backward over (sequence, kv head) pairs, each of which owns its dk / dv rows
// and the dq rows of its query heads, so no two threads write the same element.
#include "gpu/ops/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace tandem::gpu::ops::cpu {
namespace {

template <class T>
double dot(const T* a, const T* b, std::int64_t n) {
  double s = 0;
  for (std::int64_t c = 0; c < n; ++c) s += static_cast<double>(a[c]) * static_cast<double>(b[c]);
  return s;
}

/// The first key a query at token t sees: its sequence's first token, or with a window W > 0 the
/// later of that and t - W + 1.
std::int64_t first_visible(std::int64_t sequence_start, std::int64_t t, std::int64_t window) {
  return window > 0 ? std::max(sequence_start, t - window + 1) : sequence_start;
}

/// The scaled score of query row qi against key kj, rounded to the compute dtype.
template <class T>
T score(const T* qi, const T* kj, std::int64_t d, double scaling) {
  return static_cast<T>(dot(qi, kj, d) * scaling);
}

}  // namespace

template <class T>
void attention_forward(const T* q, const T* k, const T* v, const std::int32_t* cu_seqlens, const attention_dims& dims,
                       double scaling, std::int64_t window, T* out, T* lse) {
  const std::int64_t heads = dims.heads, kv_heads = dims.kv_heads, d = dims.head_dim;
  const std::int64_t group = heads / kv_heads;
  std::vector<std::int64_t> start(static_cast<std::size_t>(dims.tokens));  // first token of each token's sequence
  for (std::int64_t s = 0; s < dims.num_seqs; ++s)
    for (std::int64_t t = cu_seqlens[s]; t < cu_seqlens[s + 1]; ++t) start[static_cast<std::size_t>(t)] = cu_seqlens[s];
  const std::int64_t rows = dims.tokens * heads;
#pragma omp parallel
  {
    std::vector<T> e;  // scores, then exp(score - max), of the visible keys
    std::vector<double> acc(static_cast<std::size_t>(d));
#pragma omp for schedule(dynamic, 16)
    for (std::int64_t row = 0; row < rows; ++row) {
      const std::int64_t t = row / heads, h = row % heads, g = h / group;
      const std::int64_t first = first_visible(start[static_cast<std::size_t>(t)], t, window);
      const T* qi = q + row * d;
      e.resize(static_cast<std::size_t>(t - first + 1));
      T m = -std::numeric_limits<T>::infinity();
      for (std::int64_t j = first; j <= t; ++j) {
        const T s = score(qi, k + (j * kv_heads + g) * d, d, scaling);
        e[static_cast<std::size_t>(j - first)] = s;
        m = std::max(m, s);
      }
      double sum = 0;
      for (T& x : e) {
        x = std::exp(x - m);
        sum += static_cast<double>(x);
      }
      lse[row] = static_cast<T>(static_cast<double>(m) + std::log(sum));
      std::fill(acc.begin(), acc.end(), 0.0);
      for (std::int64_t j = first; j <= t; ++j) {
        const T p_t = static_cast<T>(static_cast<double>(e[static_cast<std::size_t>(j - first)]) / sum);
        const auto p = static_cast<double>(p_t);  // the probability as the compute dtype holds it
        const T* vj = v + (j * kv_heads + g) * d;
        for (std::int64_t c = 0; c < d; ++c) acc[static_cast<std::size_t>(c)] += p * static_cast<double>(vj[c]);
      }
      for (std::int64_t c = 0; c < d; ++c) out[row * d + c] = static_cast<T>(acc[static_cast<std::size_t>(c)]);
    }
  }
}

template <class T>
void attention_backward(const T* q, const T* k, const T* v, const std::int32_t* cu_seqlens, const attention_dims& dims,
                        double scaling, std::int64_t window, const T* lse, const T* dout, T* dq, T* dk, T* dv,
                        bool accumulate_dq) {
  const std::int64_t heads = dims.heads, kv_heads = dims.kv_heads, d = dims.head_dim;
  const std::int64_t group = heads / kv_heads;
  const std::int64_t pairs = dims.num_seqs * kv_heads;
  const auto at = [](std::int64_t i) { return static_cast<std::size_t>(i); };
#pragma omp parallel
  {
    std::vector<double> p, dp, dk_acc, dv_acc, dq_acc(at(d));
#pragma omp for schedule(dynamic)
    for (std::int64_t pair = 0; pair < pairs; ++pair) {
      const std::int64_t s = pair / kv_heads, g = pair % kv_heads;
      const std::int64_t begin = cu_seqlens[s], end = cu_seqlens[s + 1];
      if (begin == end) continue;
      dk_acc.assign(at((end - begin) * d), 0.0);  // this sequence's rows of kv head g, in double
      dv_acc.assign(at((end - begin) * d), 0.0);
      for (std::int64_t h = g * group; h < (g + 1) * group; ++h) {
        for (std::int64_t t = begin; t < end; ++t) {
          const std::int64_t row = t * heads + h;
          const std::int64_t first = first_visible(begin, t, window), count = t - first + 1;
          const T* qi = q + row * d;
          const T* doi = dout + row * d;
          p.resize(at(count));
          dp.resize(at(count));
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

template void attention_forward<float>(const float*, const float*, const float*, const std::int32_t*,
                                       const attention_dims&, double, std::int64_t, float*, float*);
template void attention_forward<double>(const double*, const double*, const double*, const std::int32_t*,
                                        const attention_dims&, double, std::int64_t, double*, double*);
template void attention_backward<float>(const float*, const float*, const float*, const std::int32_t*,
                                        const attention_dims&, double, std::int64_t, const float*, const float*, float*,
                                        float*, float*, bool);
template void attention_backward<double>(const double*, const double*, const double*, const std::int32_t*,
                                         const attention_dims&, double, std::int64_t, const double*, const double*,
                                         double*, double*, double*, bool);

}  // namespace tandem::gpu::ops::cpu
