// Temperature, top-k and top-p of one row: the ranking, the cut of the kept prefix and the
// normaliser S (the definition in gpu/ops/logprobs.h).
#include "gpu/ops/cpu/token_filter.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace tandem::gpu::ops::cpu {
namespace {

/// Token a ranks before token b: larger logit first, the lower id first among equal logits.
template <class T>
struct ranks_before {
  const T* x;
  bool operator()(std::int32_t a, std::int32_t b) const { return x[a] > x[b] || (x[a] == x[b] && a < b); }
};

/// sum e_j over the tokens `row` keeps, in ascending id order.
template <class T>
double kept_sum(const filtered_row& row, const T* x, std::int64_t v) {
  double sum = 0.0;
  for (std::int64_t j = 0; j < v; ++j)
    if (is_kept(row, x, j)) sum += token_weight(row, static_cast<double>(x[j]));
  return sum;
}

/// The shortest ranking prefix of order[0..n) (the top-k set K, in no particular order yet)
/// whose e-sum reaches top_p * S_K; returns its length (>= 1). Sorts the prefix it walks, a
/// growing chunk at a time, so a sharp distribution never sorts the whole vocabulary.
template <class T>
std::int64_t top_p_prefix(const filtered_row& row, const T* x, std::vector<std::int32_t>& order, std::int64_t n,
                          double target) {
  const ranks_before<T> before{x};
  double mass = 0.0;
  std::int64_t sorted = 0, kept = 0;
  while (kept < n && mass < target) {
    if (kept == sorted) {
      const std::int64_t next = std::min<std::int64_t>(n, std::max<std::int64_t>(256, 2 * sorted));
      if (next < n) std::nth_element(order.begin() + sorted, order.begin() + next, order.begin() + n, before);
      std::sort(order.begin() + sorted, order.begin() + next, before);
      sorted = next;
    }
    mass += token_weight(row, static_cast<double>(x[order[static_cast<std::size_t>(kept)]]));
    ++kept;
  }
  return kept;
}

}  // namespace

double scaled_logit(const filtered_row& row, double x_j) { return (x_j - row.x_max) / row.temperature; }

double token_weight(const filtered_row& row, double x_j) { return std::exp(scaled_logit(row, x_j)); }

template <class T>
double token_logprob(const filtered_row& row, const T* x, std::int64_t j) {
  if (!is_kept(row, x, j)) return -std::numeric_limits<double>::infinity();
  return scaled_logit(row, static_cast<double>(x[j])) - row.log_sum;
}

template <class T>
bool filter_row(const T* x, std::int64_t v, const sampling_params& params, std::vector<std::int32_t>& order,
                filtered_row& row) {
  row = filtered_row{};
  row.temperature = params.temperature;
  std::int64_t arg = 0;
  for (std::int64_t j = 0; j < v; ++j) {
    if (!std::isfinite(x[j])) return false;
    if (x[j] > x[arg]) arg = j;
  }
  row.argmax = arg;
  row.x_max = static_cast<double>(x[arg]);

  const bool use_k = params.top_k > 0 && params.top_k < v;
  const bool use_p = params.top_p < 1.0;
  if (use_k || use_p) {
    order.resize(static_cast<std::size_t>(v));
    std::iota(order.begin(), order.end(), std::int32_t{0});
  }
  const std::int64_t n = use_k ? params.top_k : v;
  if (use_k) {  // K = order[0..n), its last-ranked token at n - 1
    std::nth_element(order.begin(), order.begin() + (n - 1), order.end(), ranks_before<T>{x});
    row.all_kept = false;
    row.cut_id = order[static_cast<std::size_t>(n - 1)];
  }
  const double sum_k = kept_sum(row, x, v);
  row.sum = sum_k;
  if (use_p) {
    const std::int64_t kept = top_p_prefix(row, x, order, n, params.top_p * sum_k);
    row.all_kept = false;
    row.cut_id = order[static_cast<std::size_t>(kept - 1)];
    row.sum = kept_sum(row, x, v);
  }
  row.log_sum = std::log(row.sum);
  return true;
}

template bool filter_row<float>(const float*, std::int64_t, const sampling_params&, std::vector<std::int32_t>&,
                                filtered_row&);
template bool filter_row<double>(const double*, std::int64_t, const sampling_params&, std::vector<std::int32_t>&,
                                 filtered_row&);
template double token_logprob<float>(const filtered_row&, const float*, std::int64_t);
template double token_logprob<double>(const filtered_row&, const double*, std::int64_t);

}  // namespace tandem::gpu::ops::cpu
