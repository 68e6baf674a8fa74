// Temperature, top-k and top-p of one row of logits (the definition in gpu/ops/logprobs.h,
// sampling_params): the one implementation that the CPU scorer and the CPU sampler both call, so a
// sampled token's logprob and its score are the same bits.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "gpu/ops/logprobs.h"

namespace tandem::gpu::ops::cpu {

/// One row's filtered distribution. The kept set P is a ranking prefix, stored as its last token.
struct filtered_row {
  double temperature = 1.0;
  double x_max = 0.0;         ///< the row's largest logit
  std::int64_t argmax = 0;    ///< the first-ranked token (lowest id among the largest logits)
  bool all_kept = true;       ///< P = every token
  std::int64_t cut_id = 0;    ///< when !all_kept: the last token of P in ranking order
  double sum = 1.0;           ///< S = sum_{j in P} e_j over ascending ids
  double log_sum = 0.0;       ///< log(S)
};

/// Fills `row` for x[0..v) under `params` (temperature > 0). `order` is scratch, resized to v
/// only when top-k or top-p is active. Returns false, leaving `row` unspecified, when x holds a
/// non-finite value.
template <class T>
bool filter_row(const T* x, std::int64_t v, const sampling_params& params, std::vector<std::int32_t>& order,
                filtered_row& row);

/// Runs body(r, x_r, row) for every row r of logits [rows, v] whose filter_row succeeds, rows in
/// parallel (OpenMP, one scratch order and row per thread). Returns the first row the filter
/// refused (a non-finite logit), or -1.
template <class T, class Body>
std::int64_t for_each_filtered_row(const T* logits, std::int64_t rows, std::int64_t v, const sampling_params& params,
                                   Body&& body) {
  std::int64_t bad = rows;
#pragma omp parallel
  {
    std::vector<std::int32_t> order;
    filtered_row row;
#pragma omp for schedule(dynamic) reduction(min : bad)
    for (std::int64_t r = 0; r < rows; ++r) {
      const T* x = logits + r * v;
      if (!filter_row(x, v, params, order, row)) {
        bad = std::min(bad, r);
        continue;
      }
      body(r, x, row);
    }
  }
  return bad == rows ? -1 : bad;
}

/// Whether token j of x is in P: it ranks at or before the cut (comparisons only).
template <class T>
inline bool is_kept(const filtered_row& row, const T* x, std::int64_t j) {
  if (row.all_kept) return true;
  const T cut = x[row.cut_id];
  return x[j] > cut || (x[j] == cut && j <= row.cut_id);
}

/// d = (x_j - x_max) / T in double.
double scaled_logit(const filtered_row& row, double x_j);

/// e = exp(d): the unnormalised probability entering S.
double token_weight(const filtered_row& row, double x_j);

/// logprob_j = d_j - log(S) for j in P, -infinity otherwise, in double (the scorer and the
/// sampler round this same value to their dtype).
template <class T>
double token_logprob(const filtered_row& row, const T* x, std::int64_t j);

}  // namespace tandem::gpu::ops::cpu
