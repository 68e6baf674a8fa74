// The order a run draws its training prompts in: epoch after epoch over the prompt set, each
// epoch the records in file order (data.shuffle false) or in a permutation of its own, seeded by
// grpo.seed and the epoch (data.shuffle true). Draw p (counted from the run's first prompt) is
// epoch p / N's position p % N, so a resumed run that knows how many prompts were drawn continues
// the same sequence.
//
// The permutation is Fisher-Yates over a SplitMix64 stream (Steele, Lea and Flood's finaliser on
// a Weyl sequence started at the seed), each index drawn without bias by rejection: a pure
// function of (size, seed) that any language can recompute.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tandem::data {

/// A permutation of 0 .. size - 1 from `seed` (above).
std::vector<std::size_t> seeded_permutation(std::size_t size, std::uint64_t seed);

class prompt_order {
 public:
  /// Over `size` prompts (>= 1).
  prompt_order(std::size_t size, bool shuffle, std::uint64_t seed);

  /// The prompt drawn at draw `position`.
  std::size_t at(std::uint64_t position);
  /// The 0-based epoch draw `position` falls in.
  std::uint64_t epoch_of(std::uint64_t position) const { return position / size_; }
  std::size_t size() const { return size_; }

 private:
  std::size_t size_;
  bool shuffle_;
  std::uint64_t seed_;
  std::uint64_t cached_epoch_ = ~std::uint64_t{0};
  std::vector<std::size_t> permutation_;  // the cached epoch's
};

}  // namespace tandem::data
