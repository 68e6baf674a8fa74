// bfloat16 and float16 storage types with exact conversions to and from float32: widening is
// exact; narrowing rounds to nearest, ties to even, keeps NaN a NaN, and handles subnormals.
#pragma once

#include <bit>
#include <cstdint>

namespace tandem::gpu {

struct bfloat16 {
  std::uint16_t bits = 0;
};

struct float16 {
  std::uint16_t bits = 0;
};

/// Exact: a bfloat16 is the top half of a float32.
inline float to_float(bfloat16 x) { return std::bit_cast<float>(static_cast<std::uint32_t>(x.bits) << 16); }

/// Round to nearest even; NaN stays NaN (quiet), infinities stay infinite.
inline bfloat16 to_bfloat16(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return {static_cast<std::uint16_t>((u >> 16) | 0x0040u)};
  const std::uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return {static_cast<std::uint16_t>((u + rounding) >> 16)};
}

/// Exact widening of an IEEE binary16, subnormals included.
float to_float(float16 x);

/// Round to nearest even, with overflow to infinity and gradual underflow to subnormals.
float16 to_float16(float f);

}  // namespace tandem::gpu
