// The forward of one query row of causal attention, shared by the packed kernel (attention.cpp)
// and the paged one (paged_attention.cpp), so a row attending to the same keys gives the same
// bits whichever way its keys are stored: scores rounded to the compute dtype, their maximum,
// exp(score - max) in the compute dtype summed in double, probabilities rounded to the compute
// dtype, and the output accumulated in double, keys taken in position order.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace tandem::gpu::ops::cpu {

template <class T>
double dot(const T* a, const T* b, std::int64_t n) {
  double s = 0;
  for (std::int64_t c = 0; c < n; ++c) s += static_cast<double>(a[c]) * static_cast<double>(b[c]);
  return s;
}

/// The scaled score of query row qi against key kj, rounded to the compute dtype.
template <class T>
T score(const T* qi, const T* kj, std::int64_t d, double scaling) {
  return static_cast<T>(dot(qi, kj, d) * scaling);
}

/// out_row [d] and *lse_out for query qi over the keys at positions first..last (inclusive);
/// key_at(j) and value_at(j) give the d values of position j. e: scratch of last - first + 1
/// values; acc: scratch of d doubles.
template <class T, class KeyAt, class ValueAt>
void attend_row(const T* qi, std::int64_t first, std::int64_t last, const KeyAt& key_at, const ValueAt& value_at,
                std::int64_t d, double scaling, T* e, double* acc, T* out_row, T* lse_out) {
  T m = -std::numeric_limits<T>::infinity();
  for (std::int64_t j = first; j <= last; ++j) {
    const T s = score(qi, key_at(j), d, scaling);
    e[j - first] = s;
    m = std::max(m, s);
  }
  double sum = 0;
  for (std::int64_t i = 0; i <= last - first; ++i) {
    e[i] = std::exp(e[i] - m);
    sum += static_cast<double>(e[i]);
  }
  *lse_out = static_cast<T>(static_cast<double>(m) + std::log(sum));
  std::fill(acc, acc + d, 0.0);
  for (std::int64_t j = first; j <= last; ++j) {
    const T p_t = static_cast<T>(static_cast<double>(e[j - first]) / sum);
    const auto p = static_cast<double>(p_t);  // the probability as the compute dtype holds it
    const T* vj = value_at(j);
    for (std::int64_t c = 0; c < d; ++c) acc[c] += p * static_cast<double>(vj[c]);
  }
  for (std::int64_t c = 0; c < d; ++c) out_row[c] = static_cast<T>(acc[c]);
}

}  // namespace tandem::gpu::ops::cpu
