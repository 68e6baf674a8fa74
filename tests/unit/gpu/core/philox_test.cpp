// Counter-based randomness: Philox4x32-10 known answers and the coordinate scheme.
#include <boost/test/unit_test.hpp>

#include <set>

#include "gpu/core/philox.h"

using namespace tandem::gpu;

BOOST_AUTO_TEST_SUITE(philox_test)

BOOST_AUTO_TEST_CASE(philox4x32_10_reproduces_the_random123_known_answers) {
  BOOST_TEST((philox4x32_10({0, 0, 0, 0}, {0, 0}) == philox_counter{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  BOOST_TEST((philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}) ==
              philox_counter{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  BOOST_TEST((philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}) ==
              philox_counter{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

BOOST_AUTO_TEST_CASE(every_coordinate_changes_the_draw) {
  const rng_coordinates base{42, 3, 1, 5, 2, 17};
  std::set<std::uint32_t> words{random_words(base)[0]};
  for (int field = 0; field < 6; ++field) {
    rng_coordinates c = base;
    switch (field) {
      case 0: c.seed += 1; break;
      case 1: c.step += 1; break;
      case 2: c.round += 1; break;
      case 3: c.prompt += 1; break;
      case 4: c.sample += 1; break;
      case 5: c.position += 1; break;
    }
    words.insert(random_words(c)[0]);
  }
  BOOST_TEST(words.size() == 7u);
  BOOST_TEST((random_words(base) == random_words(rng_coordinates{42, 3, 1, 5, 2, 17})));  // pure function
}

BOOST_AUTO_TEST_CASE(uniform_floats_lie_in_the_half_open_unit_interval) {
  BOOST_TEST(uniform_float(0u) == 0.0f);
  BOOST_TEST(uniform_float(0xffffffffu) < 1.0f);
  BOOST_TEST(uniform_float(0xffffffffu) == 1.0f - 0x1.0p-24f);
  double mean = 0;
  for (std::uint32_t p = 0; p < 4096; ++p) mean += uniform_float(random_words({7, 0, 0, 0, 0, p})[0]);
  BOOST_TEST(mean / 4096 == 0.5, boost::test_tools::tolerance(0.03));
}

BOOST_AUTO_TEST_SUITE_END()
