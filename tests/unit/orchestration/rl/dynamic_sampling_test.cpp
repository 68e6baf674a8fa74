// Dynamic sampling over a step's generation rounds: samples whose unshaped-reward std is 0 are
// dropped, the rest are cached across rounds until the target is reached, the batch is the first
// target samples kept, the excess is counted as discarded valid samples; the round after
// dynamic_sampling_max_gen_batches that still leaves the cache short ends the step with an error
// that says so, with the numbers; calls out of turn are refused.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <limits>
#include <vector>

#include "orchestration/rl/dynamic_sampling.h"

namespace rl = tandem::rl;

namespace {

/// A round of prompts with 4 generations each: `rewards[p]` are prompt p's four unshaped rewards;
/// the payload of generation j of prompt p in round `round` is round*100 + 4p + j.
std::vector<rl::round_sample> round_of(std::int64_t round, const std::vector<std::vector<double>>& rewards) {
  std::vector<rl::round_sample> out;
  for (std::size_t p = 0; p < rewards.size(); ++p)
    for (std::size_t j = 0; j < rewards[p].size(); ++j)
      out.push_back({static_cast<std::int64_t>(p), rewards[p][j], round * 100 + static_cast<std::int64_t>(4 * p + j)});
  return out;
}

rl::dynamic_sampling_cache make_cache(std::int64_t target, std::int64_t max_rounds,
                                      rl::baseline_kind kind = rl::baseline_kind::mean) {
  auto c = rl::dynamic_sampling_cache::create({target, max_rounds, kind});
  BOOST_TEST_REQUIRE(static_cast<bool>(c));
  return *c;
}

const std::vector<double> all_right{1, 1, 1, 1}, all_wrong{-1, -1, -1, -1};

}  // namespace

BOOST_AUTO_TEST_SUITE(dynamic_sampling_test)

BOOST_AUTO_TEST_CASE(groups_whose_rewards_differ_fill_the_batch_over_rounds_which_is_sliced_to_exactly_the_target) {
  // Target 2 prompts x 4 generations = 8 samples.
  auto cache = make_cache(8, 10);
  // Round 1: prompt 0 all right, prompt 2 all wrong: dropped; prompt 1 differs: 4 kept (101..107 -> 104..107).
  BOOST_TEST(!cache.add_round(round_of(1, {all_right, {1, -1, 1, 1}, all_wrong})));
  BOOST_TEST((cache.state() == rl::dynamic_sampling_state::collecting));
  BOOST_TEST(cache.kept() == 4);
  BOOST_TEST(cache.rounds() == 1);
  // Round 2: prompts 1 and 2 differ: 8 more kept, 12 in all >= 8: full.
  BOOST_TEST(!cache.add_round(round_of(2, {all_right, {-1, 1, -1, -1}, {1, -1, -1, 1}})));
  BOOST_TEST((cache.state() == rl::dynamic_sampling_state::full));
  BOOST_TEST(cache.kept() == 12);

  const auto batch = cache.take();
  BOOST_TEST_REQUIRE(static_cast<bool>(batch));
  // The first 8 kept: round 1 prompt 1 (payloads 104..107), round 2 prompt 1 (204..207);
  // round 2 prompt 2 (208..211) is the excess.
  std::vector<std::int64_t> payloads, group_of, round_of_sample;
  for (const auto& s : batch->samples) {
    payloads.push_back(s.payload);
    group_of.push_back(s.group);
    round_of_sample.push_back(s.round);
  }
  BOOST_TEST(payloads == (std::vector<std::int64_t>{104, 105, 106, 107, 204, 205, 206, 207}), boost::test_tools::per_element());
  BOOST_TEST(group_of == (std::vector<std::int64_t>{0, 0, 0, 0, 1, 1, 1, 1}), boost::test_tools::per_element());
  BOOST_TEST(round_of_sample == (std::vector<std::int64_t>{1, 1, 1, 1, 2, 2, 2, 2}), boost::test_tools::per_element());
  BOOST_TEST(batch->group_count == 2);
  BOOST_TEST(batch->metrics.num_gen_batches == 2);
  BOOST_TEST(batch->metrics.num_discarded_valid_samples == 4);
  BOOST_TEST((cache.state() == rl::dynamic_sampling_state::taken));
}

BOOST_AUTO_TEST_CASE(a_batch_filled_in_one_round_discards_nothing_when_exactly_full) {
  auto cache = make_cache(8, 10);
  BOOST_TEST(!cache.add_round(round_of(1, {{1, -1, 1, 1}, all_wrong, {-1, -1, 1, -1}})));
  const auto batch = cache.take();
  BOOST_TEST_REQUIRE(static_cast<bool>(batch));
  BOOST_TEST(batch->samples.size() == 8u);
  BOOST_TEST(batch->samples.front().payload == 100);
  BOOST_TEST(batch->samples.back().payload == 111);
  BOOST_TEST(batch->metrics.num_gen_batches == 1);
  BOOST_TEST(batch->metrics.num_discarded_valid_samples == 0);
}

BOOST_AUTO_TEST_CASE(dynamic_sampling_that_exhausts_its_rounds_fails_saying_it_ran_out_with_the_numbers) {
  // max 2 rounds: rounds 1 and 2 may leave the cache short, round 3 may not.
  auto cache = make_cache(8, 2);
  BOOST_TEST(!cache.add_round(round_of(1, {all_right, all_wrong})));          // 0 kept
  BOOST_TEST(!cache.add_round(round_of(2, {all_right, {1, -1, -1, -1}})));    // 4 kept
  const auto e = cache.add_round(round_of(3, {all_wrong, all_right}));        // still 4
  BOOST_TEST_REQUIRE(e.has_value());
  BOOST_TEST((e->code == rl::rl_errc::out_of_rounds));
  const std::string expected =
      "dynamic sampling ran out of rounds: after 3 generation rounds (dynamic_sampling_max_gen_batches = 2) it kept "
      "4 samples of groups whose rewards differ, 8 are needed";
  BOOST_TEST(e->message == expected);
  BOOST_TEST((cache.state() == rl::dynamic_sampling_state::exhausted));
  // Every later call gives the same answer.
  const auto taken = cache.take();
  BOOST_TEST_REQUIRE(!taken);
  BOOST_TEST(taken.error().message == expected);
  const auto again = cache.add_round(round_of(4, {{1, -1, 1, -1}, {1, -1, 1, -1}}));
  BOOST_TEST_REQUIRE(again.has_value());
  BOOST_TEST(again->message == expected);
  BOOST_TEST(cache.rounds() == 3);
}

BOOST_AUTO_TEST_CASE(the_round_after_the_last_allowed_one_still_fills_the_batch_when_it_brings_enough) {
  // NeMo-RL raises only when a round past max_gen_batches leaves the cache short.
  auto cache = make_cache(8, 1);
  BOOST_TEST(!cache.add_round(round_of(1, {all_right, {1, -1, -1, -1}})));
  BOOST_TEST(!cache.add_round(round_of(2, {{1, 1, -1, -1}, all_right})));
  BOOST_TEST((cache.state() == rl::dynamic_sampling_state::full));
  const auto batch = cache.take();
  BOOST_TEST_REQUIRE(static_cast<bool>(batch));
  BOOST_TEST(batch->metrics.num_gen_batches == 2);
}

BOOST_AUTO_TEST_CASE(under_leave_one_out_a_sample_whose_other_group_members_agree_is_dropped_alone) {
  // Prompt 0 {1, 1, 1, -1}: for the -1 the others are all 1 (std 0): dropped; each 1 sees {1, 1, -1}: kept.
  auto cache = make_cache(3, 10, rl::baseline_kind::leave_one_out);
  BOOST_TEST(!cache.add_round(round_of(1, {{1, 1, 1, -1}})));
  const auto batch = cache.take();
  BOOST_TEST_REQUIRE(static_cast<bool>(batch));
  BOOST_TEST(batch->samples.size() == 3u);
  BOOST_TEST(batch->samples.back().payload == 102);
}

BOOST_AUTO_TEST_CASE(the_same_group_id_in_two_rounds_is_two_groups_of_the_batch) {
  auto cache = make_cache(8, 10);
  BOOST_TEST(!cache.add_round(round_of(1, {{1, -1, 1, 1}})));
  BOOST_TEST(!cache.add_round(round_of(2, {{1, -1, 1, 1}})));
  const auto batch = cache.take();
  BOOST_TEST_REQUIRE(static_cast<bool>(batch));
  BOOST_TEST(batch->group_count == 2);
  BOOST_TEST(batch->samples[3].group == 0);
  BOOST_TEST(batch->samples[4].group == 1);
}

BOOST_AUTO_TEST_CASE(taking_before_the_batch_is_full_or_adding_after_it_is_refused_as_the_wrong_state) {
  auto cache = make_cache(8, 10);
  BOOST_TEST(!cache.add_round(round_of(1, {{1, -1, 1, 1}})));
  const auto early = cache.take();
  BOOST_TEST_REQUIRE(!early);
  BOOST_TEST((early.error().code == rl::rl_errc::wrong_state));
  BOOST_TEST(early.error().message == "dynamic sampling: the cache holds 4 of the 8 samples needed; add another round");
  BOOST_TEST(!cache.add_round(round_of(2, {{1, -1, 1, 1}})));
  const auto late = cache.add_round(round_of(3, {{1, -1, 1, 1}}));
  BOOST_TEST_REQUIRE(late.has_value());
  BOOST_TEST((late->code == rl::rl_errc::wrong_state));
  BOOST_TEST(cache.rounds() == 2);
}

BOOST_AUTO_TEST_CASE(a_round_with_a_reward_that_is_not_finite_is_refused_and_not_counted) {
  auto cache = make_cache(8, 10);
  const auto e = cache.add_round(round_of(1, {{1, -1, std::numeric_limits<double>::quiet_NaN(), 1}}));
  BOOST_TEST_REQUIRE(e.has_value());
  BOOST_TEST((e->code == rl::rl_errc::invalid_input));
  BOOST_TEST(e->message == "unshaped_rewards[2] is nan");
  BOOST_TEST(cache.rounds() == 0);
  BOOST_TEST(cache.kept() == 0);
}

BOOST_AUTO_TEST_CASE(a_cache_without_a_target_or_without_rounds_is_refused) {
  const auto no_target = rl::dynamic_sampling_cache::create({0, 10, rl::baseline_kind::mean});
  BOOST_TEST_REQUIRE(!no_target);
  BOOST_TEST((no_target.error().code == rl::rl_errc::invalid_setting));
  const auto no_rounds = rl::dynamic_sampling_cache::create({8, 0, rl::baseline_kind::mean});
  BOOST_TEST_REQUIRE(!no_rounds);
  BOOST_TEST(no_rounds.error().message == "dynamic_sampling_max_gen_batches is 0, below 1");
}

BOOST_AUTO_TEST_SUITE_END()
