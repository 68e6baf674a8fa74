// CPU kernel of sampling: inverse CDF over the kept tokens in ascending id order, one Philox
// uniform per row; greedy rows take the first-ranked token.
#include "gpu/ops/cpu/sampling.h"

#include "gpu/ops/cpu/token_filter.h"

namespace tandem::gpu::ops::cpu {
namespace {

/// The token of the inverse CDF at u over row's kept set, ascending ids, in double.
template <class T>
std::int64_t draw(const filtered_row& row, const T* x, std::int64_t v, double u) {
  double c = 0.0;
  std::int64_t last = row.argmax;
  for (std::int64_t j = 0; j < v; ++j) {
    if (!is_kept(row, x, j)) continue;
    c += token_weight(row, static_cast<double>(x[j])) / row.sum;
    if (u < c) return j;
    last = j;
  }
  return last;
}

}  // namespace

template <class T>
std::int64_t sampling_forward(const T* logits, std::int64_t rows, std::int64_t v, const sampling_params& params,
                              const rng_coordinates* coordinates, std::int32_t* tokens, T* logprobs) {
  const bool greedy = params.temperature == 0.0;
  sampling_params filter = params;
  if (greedy) filter.temperature = 1.0;  // greedy rows report their logprob at T = 1
  return for_each_filtered_row(logits, rows, v, filter, [&](std::int64_t r, const T* x, const filtered_row& row) {
    const std::int64_t token =
        greedy ? row.argmax : draw(row, x, v, static_cast<double>(uniform_float(random_words(coordinates[r])[0])));
    tokens[r] = static_cast<std::int32_t>(token);
    logprobs[r] = static_cast<T>(token_logprob(row, x, token));
  });
}

template std::int64_t sampling_forward<float>(const float*, std::int64_t, std::int64_t, const sampling_params&,
                                              const rng_coordinates*, std::int32_t*, float*);
template std::int64_t sampling_forward<double>(const double*, std::int64_t, std::int64_t, const sampling_params&,
                                               const rng_coordinates*, std::int32_t*, double*);

}  // namespace tandem::gpu::ops::cpu
