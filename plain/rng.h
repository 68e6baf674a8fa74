// Where a token's random numbers come from: the counter-based generator's coordinates
// (gpu/core/philox.h draws from them). A request carries them with position 0; the generator
// fills in each token's position.
#pragma once

#include <cstdint>

#include "plain/fields.h"

namespace tandem::plain {

struct rng_coordinates {
  static constexpr const char* type_name = "rng_coordinates";
  std::uint64_t seed = 0;       ///< grpo.seed
  std::uint32_t step = 0;       ///< RL step
  std::uint32_t round = 0;      ///< generation round within the step (dynamic sampling; validation's is 2^31)
  std::uint32_t prompt = 0;     ///< prompt index in the round
  std::uint32_t sample = 0;     ///< sample index within its prompt's group
  std::uint32_t position = 0;   ///< token position in the sequence
  bool operator==(const rng_coordinates&) const = default;

  template <class F>
  static decltype(auto) fields(F&& f, rng_coordinates& x) {
    return f(named("seed", x.seed), named("step", x.step), named("round", x.round), named("prompt", x.prompt),
             named("sample", x.sample), named("position", x.position));
  }
};

}  // namespace tandem::plain
