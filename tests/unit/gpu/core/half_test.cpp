// bfloat16 and float16 conversions: exact widening, round-to-nearest-even narrowing.
#include <boost/test/unit_test.hpp>

#include <bit>
#include <cmath>
#include <limits>

#include "gpu/core/half.h"

using namespace tandem::gpu;

namespace {
bool is_nan_bits16(std::uint16_t b, std::uint16_t exp_mask, std::uint16_t mant_mask) {
  return (b & exp_mask) == exp_mask && (b & mant_mask) != 0;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(half_test)

BOOST_AUTO_TEST_CASE(every_bfloat16_survives_a_round_trip_through_float32) {
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const bfloat16 x{static_cast<std::uint16_t>(b)};
    const bfloat16 back = to_bfloat16(to_float(x));
    if (is_nan_bits16(x.bits, 0x7f80, 0x007f)) BOOST_TEST(std::isnan(to_float(back)));
    else if (back.bits != x.bits) BOOST_ERROR("bfloat16 " << b << " came back as " << back.bits);
  }
}

BOOST_AUTO_TEST_CASE(bfloat16_rounds_to_nearest_with_ties_to_even) {
  BOOST_TEST(to_bfloat16(1.0f).bits == 0x3f80);
  BOOST_TEST(to_bfloat16(std::bit_cast<float>(0x3f808000u)).bits == 0x3f80);  // tie, even stays
  BOOST_TEST(to_bfloat16(std::bit_cast<float>(0x3f818000u)).bits == 0x3f82);  // tie, odd rounds up
  BOOST_TEST(to_bfloat16(std::bit_cast<float>(0x3f808001u)).bits == 0x3f81);  // above the tie
  BOOST_TEST(to_float(to_bfloat16(61.9677f)) == 62.0f);  // the 12B embedding scale sqrt(3840)
  BOOST_TEST(std::isinf(to_float(to_bfloat16(std::numeric_limits<float>::max()))));
  BOOST_TEST(std::isnan(to_float(to_bfloat16(std::numeric_limits<float>::quiet_NaN()))));
}

BOOST_AUTO_TEST_CASE(every_float16_survives_a_round_trip_through_float32) {
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const float16 x{static_cast<std::uint16_t>(b)};
    const float16 back = to_float16(to_float(x));
    if (is_nan_bits16(x.bits, 0x7c00, 0x03ff)) BOOST_TEST(std::isnan(to_float(back)));
    else if (back.bits != x.bits) BOOST_ERROR("float16 " << b << " came back as " << back.bits);
  }
}

BOOST_AUTO_TEST_CASE(float16_narrowing_agrees_with_rounding_in_double_for_many_floats) {
  // Reference: scale to the float16 grid in double, round half to even, compare values.
  for (std::uint32_t u = 0x33000000u; u < 0x47800000u; u += 0x1f3u) {
    const float f = std::bit_cast<float>(u);
    const double ulp = f < 0x1.0p-14f ? 0x1.0p-24 : std::ldexp(1.0, std::ilogb(f) - 10);
    const double q = std::nearbyint(static_cast<double>(f) / ulp) * ulp;  // default mode: ties to even
    const double expected = q >= 65520.0 ? std::numeric_limits<double>::infinity() : q;
    if (static_cast<double>(to_float(to_float16(f))) != expected) {
      BOOST_ERROR("float16 of " << f << " gave " << to_float(to_float16(f)) << ", expected " << expected);
      break;
    }
  }
}

BOOST_AUTO_TEST_CASE(float16_handles_overflow_and_subnormal_edges) {
  BOOST_TEST(to_float(to_float16(65504.0f)) == 65504.0f);
  BOOST_TEST(std::isinf(to_float(to_float16(65520.0f))));
  BOOST_TEST(to_float(to_float16(0x1.0p-24f)) == 0x1.0p-24f);  // smallest subnormal
  BOOST_TEST(to_float(to_float16(0x1.0p-25f)) == 0.0f);        // tie with zero: even
  BOOST_TEST(to_float(to_float16(0x1.8p-25f)) == 0x1.0p-24f);
  BOOST_TEST(to_float16(-0.0f).bits == 0x8000);
}

BOOST_AUTO_TEST_SUITE_END()
