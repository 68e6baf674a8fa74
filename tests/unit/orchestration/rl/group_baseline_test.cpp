// Group baselines and stds: the mean kind averages a group's rewards and takes their Bessel std;
// leave-one-out takes both over the other samples; a group of one sample (or one valid sample)
// baselines on its own reward with std 0; the std may come from other rewards than the
// baseline (DAPO: unshaped vs shaped); invalid samples add to nothing; bad input is named.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "orchestration/rl/group_baseline.h"

namespace rl = tandem::rl;
namespace tt = boost::test_tools;

namespace {

// Three groups, interleaved in batch order:
//   group 0: samples 0, 2, 5, 7 with rewards 1, 1, 1, -1
//   group 1: samples 1, 4, 6    with rewards 2, 4, 6
//   group 2: sample 3           with reward 0.7
const std::vector<std::int64_t> groups{0, 1, 0, 2, 1, 0, 1, 0};
const std::vector<double> rewards{1.0, 2.0, 1.0, 0.7, 4.0, 1.0, 6.0, -1.0};

}  // namespace

BOOST_AUTO_TEST_SUITE(group_baseline_test)

BOOST_AUTO_TEST_CASE(the_mean_baseline_is_the_group_mean_and_the_std_its_bessel_std) {
  // group 0: mean 2/4 = 0.5; deviations 0.5, 0.5, 0.5, -1.5: sum of squares 3, / (4-1) = 1 -> std 1.
  // group 1: mean 4; deviations -2, 0, 2: sum of squares 8, / (3-1) = 4 -> std 2.
  // group 2: one sample: baseline 0.7 (its own reward), std 0.
  const auto s = rl::group_baseline_and_std({groups, 3, rewards, {}, {}}, rl::baseline_kind::mean);
  BOOST_TEST_REQUIRE(static_cast<bool>(s));
  BOOST_TEST(s->baseline == (std::vector<double>{0.5, 4.0, 0.5, 0.7, 4.0, 0.5, 4.0, 0.5}),
             tt::tolerance(1e-12) << tt::per_element());
  BOOST_TEST(s->std == (std::vector<double>{1.0, 2.0, 1.0, 0.0, 2.0, 1.0, 2.0, 1.0}),
             tt::tolerance(1e-12) << tt::per_element());
}

BOOST_AUTO_TEST_CASE(the_leave_one_out_baseline_and_std_are_taken_over_the_other_samples_of_the_group) {
  // group 0, a sample of reward 1: others {1, 1, -1}: mean 1/3; deviations 2/3, 2/3, -4/3: squares
  //   24/9, / (3-1) = 4/3 -> std sqrt(4/3) = 1.1547005383792515.
  //   the sample of reward -1: others {1, 1, 1}: mean 1, std 0.
  // group 1: reward 2: others {4, 6}: mean 5, squares 2, / 1 -> std sqrt(2);
  //   reward 4: others {2, 6}: mean 4, squares 8 -> std 2 sqrt(2); reward 6: others {2, 4}: mean 3, std sqrt(2).
  // group 2: one sample: baseline 0.7, std 0.
  const double s43 = 1.1547005383792515, r2 = 1.4142135623730951, r8 = 2.8284271247461903;
  const auto s = rl::group_baseline_and_std({groups, 3, rewards, {}, {}}, rl::baseline_kind::leave_one_out);
  BOOST_TEST_REQUIRE(static_cast<bool>(s));
  BOOST_TEST(s->baseline == (std::vector<double>{1.0 / 3, 5.0, 1.0 / 3, 0.7, 4.0, 1.0 / 3, 3.0, 1.0}),
             tt::tolerance(1e-12) << tt::per_element());
  BOOST_TEST(s->std == (std::vector<double>{s43, r2, s43, 0.0, r8, s43, r2, 0.0}),
             tt::tolerance(1e-12) << tt::per_element());
}

BOOST_AUTO_TEST_CASE(a_leave_one_out_group_of_two_has_std_zero_for_lack_of_a_second_other_sample) {
  const std::vector<std::int64_t> g{0, 0};
  const std::vector<double> r{1.0, -1.0};
  const auto s = rl::group_baseline_and_std({g, 1, r, {}, {}}, rl::baseline_kind::leave_one_out);
  BOOST_TEST_REQUIRE(static_cast<bool>(s));
  BOOST_TEST(s->baseline == (std::vector<double>{-1.0, 1.0}), tt::per_element());
  BOOST_TEST(s->std == (std::vector<double>{0.0, 0.0}), tt::per_element());
}

BOOST_AUTO_TEST_CASE(the_std_comes_from_the_unshaped_rewards_and_the_baseline_from_the_shaped_ones) {
  // group 0: unshaped {1, 1} (both correct), shaped {1, 0.5} (one ran into the buffer):
  //   baseline 0.75, std 0: no correctness signal.
  // group 1: unshaped {1, -1}, shaped {0.5, -1}: baseline -0.25; unshaped deviations +-1, squares 2,
  //   / 1 -> std sqrt(2).
  const std::vector<std::int64_t> g{0, 0, 1, 1};
  const std::vector<double> shaped{1.0, 0.5, 0.5, -1.0};
  const std::vector<double> unshaped{1.0, 1.0, 1.0, -1.0};
  const auto s = rl::group_baseline_and_std({g, 2, shaped, unshaped, {}}, rl::baseline_kind::mean);
  BOOST_TEST_REQUIRE(static_cast<bool>(s));
  BOOST_TEST(s->baseline == (std::vector<double>{0.75, 0.75, -0.25, -0.25}), tt::tolerance(1e-12) << tt::per_element());
  BOOST_TEST(s->std == (std::vector<double>{0.0, 0.0, 1.4142135623730951, 1.4142135623730951}),
             tt::tolerance(1e-12) << tt::per_element());
}

BOOST_AUTO_TEST_CASE(invalid_samples_add_to_no_baseline_and_take_the_statistics_of_the_valid_ones) {
  // group 0: rewards {1, 1, -1, 5}, the 5 invalid. Valid {1, 1, -1}: mean 1/3, std sqrt(4/3).
  //   leave-one-out: a 1: others {1, -1}: mean 0, std sqrt(2); the -1: others {1, 1}: mean 1, std 0;
  //   the invalid sample: the valid samples' mean 1/3 and std sqrt(4/3).
  // group 1: rewards {2, 3}, only the 2 valid: each baselines on its own reward, std 0.
  const std::vector<std::int64_t> g{0, 0, 0, 0, 1, 1};
  const std::vector<double> r{1.0, 1.0, -1.0, 5.0, 2.0, 3.0};
  const std::vector<std::uint8_t> valid{1, 1, 1, 0, 1, 0};
  const double s43 = 1.1547005383792515, r2 = 1.4142135623730951;

  const auto mean = rl::group_baseline_and_std({g, 2, r, {}, valid}, rl::baseline_kind::mean);
  BOOST_TEST_REQUIRE(static_cast<bool>(mean));
  BOOST_TEST(mean->baseline == (std::vector<double>{1.0 / 3, 1.0 / 3, 1.0 / 3, 1.0 / 3, 2.0, 3.0}),
             tt::tolerance(1e-12) << tt::per_element());
  BOOST_TEST(mean->std == (std::vector<double>{s43, s43, s43, s43, 0.0, 0.0}), tt::tolerance(1e-12) << tt::per_element());

  const auto loo = rl::group_baseline_and_std({g, 2, r, {}, valid}, rl::baseline_kind::leave_one_out);
  BOOST_TEST_REQUIRE(static_cast<bool>(loo));
  BOOST_TEST(loo->baseline == (std::vector<double>{0.0, 0.0, 1.0, 1.0 / 3, 2.0, 3.0}),
             tt::tolerance(1e-12) << tt::per_element());
  BOOST_TEST(loo->std == (std::vector<double>{r2, r2, 0.0, s43, 0.0, 0.0}), tt::tolerance(1e-12) << tt::per_element());
}

BOOST_AUTO_TEST_CASE(a_group_of_equal_rewards_has_exactly_their_value_as_baseline_and_exactly_zero_std) {
  // 0.1 * 3 / 3 is not 0.1 in floating point; equal rewards must still give std == 0 exactly.
  const std::vector<std::int64_t> g{0, 0, 0};
  const std::vector<double> r{0.1, 0.1, 0.1};
  for (const auto kind : {rl::baseline_kind::mean, rl::baseline_kind::leave_one_out}) {
    const auto s = rl::group_baseline_and_std({g, 1, r, {}, {}}, kind);
    BOOST_TEST_REQUIRE(static_cast<bool>(s));
    BOOST_TEST(s->baseline == (std::vector<double>{0.1, 0.1, 0.1}), tt::per_element());
    BOOST_TEST(s->std == (std::vector<double>{0.0, 0.0, 0.0}), tt::per_element());
  }
}

BOOST_AUTO_TEST_CASE(a_group_index_out_of_range_a_reward_that_is_not_finite_and_a_size_mismatch_are_named) {
  const std::vector<double> r{1.0, 0.0, 1.0};
  const auto out_of_range =
      rl::group_baseline_and_std({std::vector<std::int64_t>{0, 1, 5}, 3, r, {}, {}}, rl::baseline_kind::mean);
  BOOST_TEST_REQUIRE(!out_of_range);
  BOOST_TEST((out_of_range.error().code == rl::rl_errc::invalid_input));
  BOOST_TEST(out_of_range.error().message == "groups[2] is 5, outside [0, 3)");

  const std::vector<double> nan{1.0, std::numeric_limits<double>::quiet_NaN(), 1.0};
  const auto not_finite =
      rl::group_baseline_and_std({std::vector<std::int64_t>{0, 0, 0}, 1, r, nan, {}}, rl::baseline_kind::mean);
  BOOST_TEST_REQUIRE(!not_finite);
  BOOST_TEST(not_finite.error().message == "std_rewards[1] is nan");

  const auto mismatch =
      rl::group_baseline_and_std({std::vector<std::int64_t>{0, 0}, 1, r, {}, {}}, rl::baseline_kind::mean);
  BOOST_TEST_REQUIRE(!mismatch);
  BOOST_TEST(mismatch.error().message == "groups has 2 entries but baseline_rewards has 3");
}

BOOST_AUTO_TEST_SUITE_END()
