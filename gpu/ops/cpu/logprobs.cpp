// CPU kernels of scoring: every row goes through filter_row (token_filter.h), the code the
// sampler uses too, then reads its target's logprob, its entropy or its softmax gradient.
#include "gpu/ops/cpu/logprobs.h"

#include "gpu/ops/cpu/token_filter.h"

namespace tandem::gpu::ops::cpu {

template <class T>
std::int64_t logprobs_forward(const T* logits, const std::int32_t* targets, std::int64_t rows, std::int64_t v,
                              const sampling_params& params, T* logprobs, T* entropy) {
  return for_each_filtered_row(logits, rows, v, params, [&](std::int64_t r, const T* x, const filtered_row& row) {
    logprobs[r] = static_cast<T>(token_logprob(row, x, targets[r]));
    if (entropy == nullptr) return;
    // H = -sum p_j log p_j = log S - sum_j e_j d_j / S over the kept set, ascending ids.
    double weighted = 0.0;
    for (std::int64_t j = 0; j < v; ++j) {
      if (!is_kept(row, x, j)) continue;
      const double d = scaled_logit(row, static_cast<double>(x[j]));
      weighted += token_weight(row, static_cast<double>(x[j])) * d;
    }
    entropy[r] = static_cast<T>(row.log_sum - weighted / row.sum);
  });
}

template <class T>
std::int64_t logprobs_backward(const T* logits, const std::int32_t* targets, const T* dlogprobs, std::int64_t rows,
                               std::int64_t v, const sampling_params& params, T* dlogits, bool accumulate) {
  return for_each_filtered_row(logits, rows, v, params, [&](std::int64_t r, const T* x, const filtered_row& row) {
    T* dx = dlogits + r * v;
    const std::int64_t target = targets[r];
    const bool scored = is_kept(row, x, target);  // a masked target's logprob is a constant -inf
    const double scale = static_cast<double>(dlogprobs[r]) / row.temperature;
    for (std::int64_t j = 0; j < v; ++j) {
      double g = 0.0;
      if (scored && is_kept(row, x, j)) {
        const double p = token_weight(row, static_cast<double>(x[j])) / row.sum;
        g = ((j == target ? 1.0 : 0.0) - p) * scale;
      }
      dx[j] = accumulate ? static_cast<T>(static_cast<double>(dx[j]) + g) : static_cast<T>(g);
    }
  });
}

template std::int64_t logprobs_forward<float>(const float*, const std::int32_t*, std::int64_t, std::int64_t,
                                              const sampling_params&, float*, float*);
template std::int64_t logprobs_forward<double>(const double*, const std::int32_t*, std::int64_t, std::int64_t,
                                               const sampling_params&, double*, double*);
template std::int64_t logprobs_backward<float>(const float*, const std::int32_t*, const float*, std::int64_t,
                                               std::int64_t, const sampling_params&, float*, bool);
template std::int64_t logprobs_backward<double>(const double*, const std::int32_t*, const double*, std::int64_t,
                                                std::int64_t, const sampling_params&, double*, bool);

}  // namespace tandem::gpu::ops::cpu
