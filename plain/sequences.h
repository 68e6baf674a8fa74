// Variable-length token sequences packed end to end, no padding: what the trainer scores and
// trains on, and what a logprob request carries.
#pragma once

#include <cstdint>
#include <vector>

#include "plain/fields.h"

namespace tandem::plain {

struct packed_sequences {
  static constexpr const char* type_name = "packed_sequences";
  std::vector<std::int32_t> tokens;   ///< I32 [tokens]: every sequence's tokens, concatenated
  std::vector<std::int32_t> offsets;  ///< I32 [sequences + 1]: sequence s is tokens[offsets[s], offsets[s+1])
  bool operator==(const packed_sequences&) const = default;

  template <class F>
  static decltype(auto) fields(F&& f, packed_sequences& x) {
    return f(named("tokens", x.tokens), named("offsets", x.offsets));
  }
};

}  // namespace tandem::plain
