// Reward post-processing: raw rewards are clamped to the source range and mapped linearly onto
// the target range; DAPO overlong shaping leaves responses up to max_response_length -
// overlong_buffer_length alone, ramps the penalty over the buffer and keeps ramping past it; the
// unshaped (scaled) reward is kept beside the total; overlong filtering zeroes the loss
// multiplier of truncated samples; bad settings and bad rewards are named.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "orchestration/rl/overlong_filtering.h"
#include "orchestration/rl/rewards.h"

namespace rl = tandem::rl;
namespace tt = boost::test_tools;

namespace {

const rl::reward_scaling gemma4_scaling{true, 0.0, 1.0, -1.0, 1.0};
// expected = 2048 - 384 = 1664: the penalty ramps from 0 at 1664 tokens to 1 at 2048.
const rl::overlong_shaping gemma4_e2b_shaping{true, 384, 1.0, 2048};

}  // namespace

BOOST_AUTO_TEST_SUITE(rewards_test)

BOOST_AUTO_TEST_CASE(scaling_clamps_to_the_source_range_and_maps_it_linearly_onto_the_target_range) {
  // [0, 1] -> [-1, 1]: r' = -1 + (clamp(r) - 0) / 1 * 2; 0.25 -> -0.5; 1.5 clamps to 1 -> 1; -0.5 clamps to 0 -> -1.
  const std::vector<double> raw{0.0, 1.0, 0.25, 1.5, -0.5};
  const auto scaled = rl::scale_rewards(gemma4_scaling, raw);
  BOOST_TEST_REQUIRE(static_cast<bool>(scaled));
  BOOST_TEST(*scaled == (std::vector<double>{-1.0, 1.0, -0.5, 1.0, -1.0}), tt::per_element());

  // [0, 2] -> [10, 20]: 0.5 -> 10 + 0.5 / 2 * 10 = 12.5; 2 -> 20.
  const auto other = rl::scale_rewards({true, 0.0, 2.0, 10.0, 20.0}, std::vector<double>{0.5, 2.0});
  BOOST_TEST_REQUIRE(static_cast<bool>(other));
  BOOST_TEST(*other == (std::vector<double>{12.5, 20.0}), tt::per_element());
}

BOOST_AUTO_TEST_CASE(scaling_off_leaves_the_rewards_as_they_are) {
  const auto scaled = rl::scale_rewards({false, 0.0, 1.0, -1.0, 1.0}, std::vector<double>{0.0, 1.5, -3.0});
  BOOST_TEST_REQUIRE(static_cast<bool>(scaled));
  BOOST_TEST(*scaled == (std::vector<double>{0.0, 1.5, -3.0}), tt::per_element());
}

BOOST_AUTO_TEST_CASE(scaling_refuses_a_source_range_whose_max_is_not_above_its_min) {
  const auto scaled = rl::scale_rewards({true, 1.0, 1.0, -1.0, 1.0}, std::vector<double>{0.5});
  BOOST_TEST_REQUIRE(!scaled);
  BOOST_TEST((scaled.error().code == rl::rl_errc::invalid_setting));
  BOOST_TEST(scaled.error().message ==
             "reward_scaling.source_max (1) must be greater than reward_scaling.source_min (1)");
}

BOOST_AUTO_TEST_CASE(a_reward_that_is_not_finite_is_named_by_its_index) {
  const auto scaled =
      rl::scale_rewards(gemma4_scaling, std::vector<double>{0.0, std::numeric_limits<double>::quiet_NaN()});
  BOOST_TEST_REQUIRE(!scaled);
  BOOST_TEST((scaled.error().code == rl::rl_errc::invalid_input));
  BOOST_TEST(scaled.error().message == "raw_rewards[1] is nan");
  const auto shaped = rl::shape_overlong(gemma4_e2b_shaping, std::vector<double>{1.0, -INFINITY},
                                         std::vector<std::int64_t>{10, 10});
  BOOST_TEST_REQUIRE(!shaped);
  BOOST_TEST(shaped.error().message == "rewards[1] is -inf");
}

BOOST_AUTO_TEST_CASE(overlong_shaping_spares_short_responses_ramps_inside_the_buffer_and_keeps_going_past_it) {
  // penalty = min(-(len - 1664) / 384 * 1, 0):
  //   1000 -> 0 (short);  1664 -> 0 (the buffer's start);  1856 -> -192/384 = -0.5;
  //   2048 -> -1 (max_response_length);  2240 -> -576/384 = -1.5 (no lower clamp).
  const std::vector<double> rewards{1.0, 1.0, 1.0, 1.0, 1.0};
  const std::vector<std::int64_t> lengths{1000, 1664, 1856, 2048, 2240};
  const auto shaped = rl::shape_overlong(gemma4_e2b_shaping, rewards, lengths);
  BOOST_TEST_REQUIRE(static_cast<bool>(shaped));
  BOOST_TEST(*shaped == (std::vector<double>{1.0, 1.0, 0.5, 0.0, -0.5}), tt::per_element());

  // Half the penalty: 1856 -> -0.25, 2048 -> -0.5.
  const auto half = rl::shape_overlong({true, 384, 0.5, 2048}, std::vector<double>{0.0, 0.0},
                                       std::vector<std::int64_t>{1856, 2048});
  BOOST_TEST_REQUIRE(static_cast<bool>(half));
  BOOST_TEST(*half == (std::vector<double>{-0.25, -0.5}), tt::per_element());
}

BOOST_AUTO_TEST_CASE(overlong_shaping_off_leaves_long_responses_unpenalised) {
  const auto shaped = rl::shape_overlong({false, 384, 1.0, 2048}, std::vector<double>{1.0},
                                         std::vector<std::int64_t>{2048});
  BOOST_TEST_REQUIRE(static_cast<bool>(shaped));
  BOOST_TEST(*shaped == (std::vector<double>{1.0}), tt::per_element());
}

BOOST_AUTO_TEST_CASE(overlong_shaping_refuses_a_buffer_as_long_as_the_response_limit) {
  const auto shaped =
      rl::shape_overlong({true, 2048, 1.0, 2048}, std::vector<double>{1.0}, std::vector<std::int64_t>{10});
  BOOST_TEST_REQUIRE(!shaped);
  BOOST_TEST((shaped.error().code == rl::rl_errc::invalid_setting));
  BOOST_TEST(shaped.error().message ==
             "reward_shaping.max_response_length (2048) must be greater than reward_shaping.overlong_buffer_length (2048)");
}

BOOST_AUTO_TEST_CASE(overlong_shaping_refuses_lengths_that_do_not_match_the_rewards) {
  const auto shaped =
      rl::shape_overlong(gemma4_e2b_shaping, std::vector<double>{1.0, 0.0}, std::vector<std::int64_t>{10});
  BOOST_TEST_REQUIRE(!shaped);
  BOOST_TEST(shaped.error().message == "response_lengths has 1 entries but rewards has 2");
  const auto negative =
      rl::shape_overlong(gemma4_e2b_shaping, std::vector<double>{1.0}, std::vector<std::int64_t>{-3});
  BOOST_TEST_REQUIRE(!negative);
  BOOST_TEST(negative.error().message == "response_lengths[0] is -3, below 0");
}

BOOST_AUTO_TEST_CASE(processing_scales_then_shapes_and_keeps_the_scaled_reward_as_the_unshaped_one) {
  // raw {1, 0, 1} -> scaled {1, -1, 1}; lengths {100, 1856, 2048} -> penalties {0, -0.5, -1};
  // total {1, -1.5, 0}.
  const std::vector<rl::sample_outcome> samples{{1.0, 100, false}, {0.0, 1856, false}, {1.0, 2048, true}};
  const auto r = rl::process_rewards(gemma4_scaling, gemma4_e2b_shaping, samples);
  BOOST_TEST_REQUIRE(static_cast<bool>(r));
  BOOST_TEST(r->unshaped == (std::vector<double>{1.0, -1.0, 1.0}), tt::per_element());
  BOOST_TEST(r->total == (std::vector<double>{1.0, -1.5, 0.0}), tt::per_element());
}

BOOST_AUTO_TEST_CASE(overlong_filtering_gives_truncated_samples_a_loss_multiplier_of_zero_only_when_enabled) {
  const std::vector<rl::sample_outcome> samples{{1.0, 100, false}, {0.0, 2048, true}, {1.0, 50, false}};
  BOOST_TEST(rl::overlong_loss_multipliers(true, samples) == (std::vector<double>{1.0, 0.0, 1.0}), tt::per_element());
  BOOST_TEST(rl::overlong_loss_multipliers(false, samples) == (std::vector<double>{1.0, 1.0, 1.0}),
             tt::per_element());
}

BOOST_AUTO_TEST_SUITE_END()
