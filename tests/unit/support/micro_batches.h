// Micro-batches for train-engine tests: sequences scored on policy by the engine under test.
#pragma once

#include <boost/test/unit_test.hpp>

#include "gpu/engine/train_engine.h"

namespace tandem::test {

/// A micro-batch of `s` on policy: lp_prev and lp_gen are `e`'s logprobs of `s`, every token's
/// advantage is `advantage`, and every token is in the loss but each sequence's first.
inline gpu::train_micro_batch_data on_policy_micro_batch(gpu::train_engine& e, const gpu::packed_sequences& s, float advantage = 1.0f) {
  gpu::train_micro_batch_data mb;
  mb.sequences = s;
  auto lp = e.logprobs(s, {});
  BOOST_REQUIRE_MESSAGE(lp.has_value(), (lp.has_value() ? "" : lp.error().message()));
  mb.lp_prev = *lp;
  mb.lp_gen = *lp;
  mb.advantages.assign(s.tokens.size(), advantage);
  mb.mask.assign(s.tokens.size(), 1.0f);
  for (std::size_t q = 0; q + 1 < s.offsets.size(); ++q)
    if (s.offsets[q] < s.offsets[q + 1]) mb.mask[static_cast<std::size_t>(s.offsets[q])] = 0;
  return mb;
}

}  // namespace tandem::test
