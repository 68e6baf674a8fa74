// Counter-based randomness (Philox4x32-10, Salmon et al., SC'11): every random number is a pure
// function of (seed, step, generation round, prompt, sample, position), so colocated and dedicated
// runs, the CPU and CUDA samplers and a resumed run all draw the same numbers, in any order.
#pragma once

#include <array>
#include <cstdint>

#include "plain/rng.h"

namespace tandem::gpu {

using philox_counter = std::array<std::uint32_t, 4>;
using philox_key = std::array<std::uint32_t, 2>;

/// The Philox4x32 bijection with 10 rounds.
#if defined(__CUDACC__)
__host__ __device__
#endif
inline philox_counter philox4x32_10(philox_counter c, philox_key k) {
  constexpr std::uint32_t m0 = 0xD2511F53u, m1 = 0xCD9E8D57u, w0 = 0x9E3779B9u, w1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k[0] += w0;
      k[1] += w1;
    }
    const std::uint64_t p0 = static_cast<std::uint64_t>(m0) * c[0];
    const std::uint64_t p1 = static_cast<std::uint64_t>(m1) * c[2];
    const auto hi0 = static_cast<std::uint32_t>(p0 >> 32), lo0 = static_cast<std::uint32_t>(p0);
    const auto hi1 = static_cast<std::uint32_t>(p1 >> 32), lo1 = static_cast<std::uint32_t>(p1);
    c = {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
  }
  return c;
}

/// Where a random number is used. Every field enters the draw; none is hashed away.
/// seed, step, round, prompt, sample, position: one definition for every layer (plain/rng.h).
using rng_coordinates = plain::rng_coordinates;

/// The key of one (seed, round) stream: Philox of (step, round) under the seed, so streams of
/// different rounds or steps share no key structure.
#if defined(__CUDACC__)
__host__ __device__
#endif
inline philox_key stream_key(std::uint64_t seed, std::uint32_t step, std::uint32_t round) {
  const philox_key seed_key{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)};
  const philox_counter c = philox4x32_10({step, round, 0x7a6e6453u /* "Sdnz": key derivation */, 0u}, seed_key);
  return {c[0], c[1]};
}

/// Four independent 32-bit words for one position.
#if defined(__CUDACC__)
__host__ __device__
#endif
inline philox_counter random_words(const rng_coordinates& at) {
  return philox4x32_10({at.position, at.sample, at.prompt, 0u}, stream_key(at.seed, at.step, at.round));
}

/// A uniform float in [0, 1) with 24 random bits (exact in float32 and float64 alike).
#if defined(__CUDACC__)
__host__ __device__
#endif
inline float uniform_float(std::uint32_t word) { return static_cast<float>(word >> 8) * 0x1.0p-24f; }

}  // namespace tandem::gpu
