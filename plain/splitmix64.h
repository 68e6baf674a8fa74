// SplitMix64 (Steele, Lea and Flood, OOPSLA'14): the seeded draws that are not a token's Philox
// stream (gpu/core/philox.h) — prompt order, the parity task's prompts, initial weights — share
// this one definition.
#pragma once

#include <cstdint>

namespace tandem::plain {

/// The step SplitMix64 adds to its state between draws.
constexpr std::uint64_t splitmix64_increment = 0x9E3779B97F4A7C15ull;

/// The draw of a stream whose state is x before the step: (x + increment) with its bits spread
/// over all 64. A pure function of x, so a counter or a hash of coordinates can stand for x.
constexpr std::uint64_t splitmix64(std::uint64_t x) {
  x += splitmix64_increment;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace tandem::plain
