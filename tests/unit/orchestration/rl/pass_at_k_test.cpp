// pass@k by the unbiased estimator 1 - C(n-c, k)/C(n, k), checked against binomials computed by
// hand; k = n is the fraction of prompts with any correct answer; bad counts are refused.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <vector>

#include "orchestration/rl/pass_at_k.h"

namespace rl = tandem::rl;
namespace tt = boost::test_tools;

namespace {

double pass(std::int64_t n, std::int64_t c, std::int64_t k) {
  const auto p = rl::pass_at_k(n, c, k);
  BOOST_TEST_REQUIRE(static_cast<bool>(p), (p ? "" : p.error().message));
  return *p;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(pass_at_k_test)

BOOST_AUTO_TEST_CASE(pass_at_k_is_one_minus_the_chance_that_k_draws_miss_every_correct_sample) {
  // n=4, c=1, k=2: 1 - C(3,2)/C(4,2) = 1 - 3/6 = 0.5.
  BOOST_TEST(pass(4, 1, 2) == 0.5, tt::tolerance(1e-12));
  // n=5, c=2, k=2: 1 - C(3,2)/C(5,2) = 1 - 3/10 = 0.7.
  BOOST_TEST(pass(5, 2, 2) == 0.7, tt::tolerance(1e-12));
  // n=10, c=3, k=4: 1 - C(7,4)/C(10,4) = 1 - 35/210 = 5/6.
  BOOST_TEST(pass(10, 3, 4) == 0.8333333333333334, tt::tolerance(1e-12));
  // k=1 is the fraction correct: 3/8.
  BOOST_TEST(pass(8, 3, 1) == 0.375, tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(pass_at_k_is_zero_without_a_correct_sample_and_one_when_every_draw_must_hold_one) {
  BOOST_TEST(pass(4, 0, 2) == 0.0);
  BOOST_TEST(pass(4, 3, 2) == 1.0);  // n - c = 1 < k
  BOOST_TEST(pass(4, 1, 4) == 1.0);  // k = n: any correct sample
}

BOOST_AUTO_TEST_CASE(the_mean_pass_at_k_averages_over_prompts_a_sample_counting_as_correct_above_zero_reward) {
  // prompt 0: {1, 0, 0, 0} -> c=1: pass@2 = 0.5;  prompt 1: {0, 1, 1, 0} -> c=2: 1 - C(2,2)/C(4,2) = 5/6;
  // prompt 2: {0, 0, 0, 0} -> 0.  Mean (0.5 + 5/6 + 0) / 3 = 4/9.
  const std::vector<std::int64_t> groups{0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2};
  const std::vector<double> rewards{1, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0};
  const auto p = rl::mean_pass_at_k(groups, 3, rewards, 2);
  BOOST_TEST_REQUIRE(static_cast<bool>(p));
  BOOST_TEST(*p == 4.0 / 9.0, tt::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(a_k_above_a_groups_size_or_outside_the_samples_is_refused) {
  const auto big_k = rl::pass_at_k(4, 1, 5);
  BOOST_TEST_REQUIRE(!big_k);
  BOOST_TEST(big_k.error().message == "pass@k: k = 5 is outside [1, 4]");
  const auto too_many_correct = rl::pass_at_k(4, 5, 2);
  BOOST_TEST_REQUIRE(!too_many_correct);
  BOOST_TEST(too_many_correct.error().message == "pass@k: 5 correct is outside [0, 4]");
  const auto small_group =
      rl::mean_pass_at_k(std::vector<std::int64_t>{0, 0, 1}, 2, std::vector<double>{1, 0, 1}, 2);
  BOOST_TEST_REQUIRE(!small_group);
  BOOST_TEST(small_group.error().message == "pass@k: group 1 has 1 samples, fewer than k = 2");
}

BOOST_AUTO_TEST_SUITE_END()
