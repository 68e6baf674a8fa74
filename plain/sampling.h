// The sampling distribution, as the generator samples and the trainer scores (the semantics and
// the checks are gpu/ops/logprobs.h's): logits / temperature, then top-k, then top-p.
#pragma once

#include <cstdint>

#include "plain/fields.h"

namespace tandem::plain {

struct sampling_params {
  static constexpr const char* type_name = "sampling_params";
  double temperature = 1.0;  ///< T > 0; the sampler also takes 0 (greedy)
  std::int32_t top_k = 0;    ///< >= 0; 0 or >= V: no top-k
  double top_p = 1.0;        ///< in (0, 1]; 1: no top-p
  bool operator==(const sampling_params&) const = default;

  template <class F>
  static decltype(auto) fields(F&& f, sampling_params& x) {
    return f(named("temperature", x.temperature), named("top_k", x.top_k), named("top_p", x.top_p));
  }
};

}  // namespace tandem::plain
