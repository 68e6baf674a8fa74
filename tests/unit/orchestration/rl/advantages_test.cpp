// GRPO advantages: A = r - b; normalised, divided by (std + 1e-6) where std > 0 and left alone
// where the group has no spread; clamped to [clip_low, clip_high] with clip_low a signed bound;
// computed by hand for the mean and the leave-one-out baseline.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <limits>
#include <vector>

#include "orchestration/rl/advantages.h"

namespace rl = tandem::rl;
namespace tt = boost::test_tools;

namespace {

// The batch of group_baseline_test: group 0 = samples 0, 2, 5, 7 (rewards 1, 1, 1, -1),
// group 1 = samples 1, 4, 6 (rewards 2, 4, 6), group 2 = sample 3 (reward 0.7).
const std::vector<std::int64_t> groups{0, 1, 0, 2, 1, 0, 1, 0};
const std::vector<double> rewards{1.0, 2.0, 1.0, 0.7, 4.0, 1.0, 6.0, -1.0};

std::vector<double> advantages(rl::baseline_kind kind, const rl::advantage_settings& s) {
  const auto stats = rl::group_baseline_and_std({groups, 3, rewards, {}, {}}, kind);
  BOOST_TEST_REQUIRE(static_cast<bool>(stats));
  auto a = rl::compute_advantages(rewards, *stats, s);
  BOOST_TEST_REQUIRE(static_cast<bool>(a), (a ? "" : a.error().message));
  return *a;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(advantages_test)

BOOST_AUTO_TEST_CASE(mean_baseline_advantages_are_the_reward_minus_the_group_mean) {
  // baselines {0.5, 4, 0.5, 0.7, 4, 0.5, 4, 0.5}:
  //   A = {1-0.5, 2-4, 1-0.5, 0.7-0.7, 4-4, 1-0.5, 6-4, -1-0.5} = {0.5, -2, 0.5, 0, 0, 0.5, 2, -1.5}.
  BOOST_TEST(advantages(rl::baseline_kind::mean, {false, {}, {}}) ==
                 (std::vector<double>{0.5, -2.0, 0.5, 0.0, 0.0, 0.5, 2.0, -1.5}),
             tt::tolerance(1e-12) << tt::per_element());
}

BOOST_AUTO_TEST_CASE(mean_baseline_advantages_normalised_are_divided_by_the_std_plus_one_in_a_million) {
  // stds {1, 2, 1, 0, 2, 1, 2, 1}:
  //   0.5 / 1.000001 = 0.49999950000050003;  -2 / 2.000001 = -0.99999950000025;
  //   0 / anything = 0;  2 / 2.000001 = 0.99999950000025;  -1.5 / 1.000001 = -1.4999985000015001;
  //   the singleton group (std 0) keeps A = 0 undivided.
  const double h = 0.49999950000050003;
  BOOST_TEST(advantages(rl::baseline_kind::mean, {true, {}, {}}) ==
                 (std::vector<double>{h, -0.99999950000025, h, 0.0, 0.0, h, 0.99999950000025, -1.4999985000015001}),
             tt::tolerance(1e-12) << tt::per_element());
}

BOOST_AUTO_TEST_CASE(leave_one_out_advantages_are_the_reward_minus_the_mean_of_the_others) {
  // baselines {1/3, 5, 1/3, 0.7, 4, 1/3, 3, 1}:
  //   A = {2/3, 2-5, 2/3, 0, 4-4, 2/3, 6-3, -1-1} = {2/3, -3, 2/3, 0, 0, 2/3, 3, -2}
  //   (n/(n-1) times the mean-baseline advantage: 0.5 * 4/3, -2 * 3/2, -1.5 * 4/3).
  const double t = 2.0 / 3;
  BOOST_TEST(advantages(rl::baseline_kind::leave_one_out, {false, {}, {}}) ==
                 (std::vector<double>{t, -3.0, t, 0.0, 0.0, t, 3.0, -2.0}),
             tt::tolerance(1e-12) << tt::per_element());
}

BOOST_AUTO_TEST_CASE(leave_one_out_advantages_normalised_divide_by_the_std_of_the_others) {
  // stds {sqrt(4/3), sqrt 2, sqrt(4/3), 0, 2 sqrt 2, sqrt(4/3), sqrt 2, 0}:
  //   (2/3) / (1.1547005383792515 + 1e-6) = 0.5773497691900589;
  //   -3 / (1.4142135623730951 + 1e-6) = -2.121318843560703;  3 / (...) = 2.121318843560703;
  //   0 stays 0; the -1 of group 0 (its others all 1: std 0) keeps A = -2 undivided.
  const double q = 0.5773497691900589;
  BOOST_TEST(advantages(rl::baseline_kind::leave_one_out, {true, {}, {}}) ==
                 (std::vector<double>{q, -2.121318843560703, q, 0.0, 0.0, q, 2.121318843560703, -2.0}),
             tt::tolerance(1e-12) << tt::per_element());
}

BOOST_AUTO_TEST_CASE(clipping_clamps_advantages_to_the_signed_low_and_the_high_bound) {
  // {0.5, -2, 0.5, 0, 0, 0.5, 2, -1.5} clamped to [-1, 1.5] = {0.5, -1, 0.5, 0, 0, 0.5, 1.5, -1}.
  BOOST_TEST(advantages(rl::baseline_kind::mean, {false, -1.0, 1.5}) ==
                 (std::vector<double>{0.5, -1.0, 0.5, 0.0, 0.0, 0.5, 1.5, -1.0}),
             tt::tolerance(1e-12) << tt::per_element());
  // Only a high bound: the -2 and -1.5 stay.
  BOOST_TEST(advantages(rl::baseline_kind::mean, {false, {}, 1.0}) ==
                 (std::vector<double>{0.5, -2.0, 0.5, 0.0, 0.0, 0.5, 1.0, -1.5}),
             tt::tolerance(1e-12) << tt::per_element());
}

BOOST_AUTO_TEST_CASE(a_low_clip_above_the_high_clip_is_refused_naming_both) {
  const rl::group_statistics stats{{0.0}, {0.0}};
  const auto a = rl::compute_advantages(std::vector<double>{1.0}, stats, {false, 2.0, 1.0});
  BOOST_TEST_REQUIRE(!a);
  BOOST_TEST((a.error().code == rl::rl_errc::invalid_setting));
  BOOST_TEST(a.error().message == "advantage_clip_low (2) is above advantage_clip_high (1)");
}

BOOST_AUTO_TEST_CASE(a_reward_that_is_not_finite_and_statistics_of_another_size_are_named) {
  std::vector<double> r(8, 0.0);
  r[7] = std::numeric_limits<double>::quiet_NaN();
  const rl::group_statistics stats{std::vector<double>(8, 0.0), std::vector<double>(8, 0.0)};
  const auto nan = rl::compute_advantages(r, stats, {});
  BOOST_TEST_REQUIRE(!nan);
  BOOST_TEST(nan.error().message == "rewards[7] is nan");
  const auto mismatch = rl::compute_advantages(std::vector<double>(3, 0.0), stats, {});
  BOOST_TEST_REQUIRE(!mismatch);
  BOOST_TEST(mismatch.error().message == "baseline has 8 entries but rewards has 3");
}

BOOST_AUTO_TEST_SUITE_END()
