// float16 conversions (bfloat16 ones are inline in half.h).
#include "gpu/core/half.h"

namespace tandem::gpu {

float to_float(float16 x) {
  const std::uint32_t sign = static_cast<std::uint32_t>(x.bits & 0x8000u) << 16;
  const std::uint32_t exp = (x.bits >> 10) & 0x1fu;
  std::uint32_t mant = x.bits & 0x3ffu;
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));  // inf / NaN
  if (exp != 0) return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
  if (mant == 0) return std::bit_cast<float>(sign);  // signed zero
  int e = 113;  // subnormal: normalise the mantissa
  while ((mant & 0x400u) == 0) {
    mant <<= 1;
    --e;
  }
  return std::bit_cast<float>(sign | (static_cast<std::uint32_t>(e) << 23) | ((mant & 0x3ffu) << 13));
}

float16 to_float16(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return {static_cast<std::uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu))};  // NaN
  if (abs >= 0x477ff000u) return {static_cast<std::uint16_t>(sign | 0x7c00u)};  // rounds to >= 65520: inf
  if (abs >= 0x38800000u) {  // normal half (>= 2^-14)
    const std::uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
    return {static_cast<std::uint16_t>(sign | ((rounded - 0x38000000u) >> 13))};
  }
  if (abs < 0x33000000u) return {sign};  // below half the smallest subnormal (2^-25): zero
  // Subnormal half: value = mant * 2^-24, mant = round(abs_value * 2^24) with ties to even.
  const std::uint32_t exp = abs >> 23;
  const std::uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
  const std::uint32_t shift = 126 - exp;  // 14..24: bits dropped from the 24-bit mantissa
  const std::uint32_t half_bit = 1u << (shift - 1);
  std::uint32_t q = mant >> shift;
  const std::uint32_t rem = mant & ((1u << shift) - 1);
  if (rem > half_bit || (rem == half_bit && (q & 1u))) ++q;
  return {static_cast<std::uint16_t>(sign | q)};
}

}  // namespace tandem::gpu
