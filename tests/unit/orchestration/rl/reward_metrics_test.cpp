// Reward-side metrics: train/reward over the samples generated, train/filtered_reward over the
// samples trained on, mean and max generated length; validation accuracy is the mean raw reward,
// pass_k appears with several generations per prompt; each under NeMo-RL's name.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "orchestration/rl/reward_metrics.h"

namespace rl = tandem::rl;
namespace tt = boost::test_tools;

BOOST_AUTO_TEST_SUITE(reward_metrics_test)

BOOST_AUTO_TEST_CASE(train_reward_is_the_mean_total_before_filtering_and_filtered_reward_the_mean_trained_on) {
  // generated totals {1, -1.5, 0.5, -1}: mean -1/4; trained {1, 0.5}: mean 0.75;
  // lengths {100, 2240, 300, 50}: mean 2690/4 = 672.5, max 2240.
  const std::vector<double> generated{1.0, -1.5, 0.5, -1.0};
  const std::vector<std::int64_t> lengths{100, 2240, 300, 50};
  const std::vector<double> trained{1.0, 0.5};
  const auto m = rl::compute_train_reward_metrics(generated, lengths, trained);
  BOOST_TEST_REQUIRE(static_cast<bool>(m));
  BOOST_TEST(m->reward == -0.25, tt::tolerance(1e-12));
  BOOST_TEST(m->filtered_reward == 0.75, tt::tolerance(1e-12));
  BOOST_TEST(m->mean_gen_tokens_per_sample == 672.5, tt::tolerance(1e-12));
  BOOST_TEST(m->max_gen_tokens_per_sample == 2240);

  const auto n = rl::named(*m);
  BOOST_TEST_REQUIRE(n.size() == 4u);
  BOOST_TEST(n[0].first == "train/reward");
  BOOST_TEST(n[1].first == "train/filtered_reward");
  BOOST_TEST(n[2].first == "train/mean_gen_tokens_per_sample");
  BOOST_TEST(n[3].first == "train/max_gen_tokens_per_sample");
  BOOST_TEST(n[3].second == 2240.0);
}

BOOST_AUTO_TEST_CASE(validation_reports_accuracy_as_the_mean_raw_reward_and_pass_k_over_each_prompts_generations) {
  // 2 prompts x 4 generations: {1, 0, 0, 0} and {0, 0, 0, 0}: accuracy 1/8 = 0.125;
  // pass@4: prompt 0 has a correct answer (1), prompt 1 none (0): 0.5; lengths mean 800/8 = 100.
  const std::vector<double> rewards{1, 0, 0, 0, 0, 0, 0, 0};
  const std::vector<std::int64_t> lengths{50, 150, 100, 100, 100, 100, 100, 100};
  const auto m = rl::compute_validation_metrics(rewards, lengths, 4);
  BOOST_TEST_REQUIRE(static_cast<bool>(m));
  BOOST_TEST(m->accuracy == 0.125, tt::tolerance(1e-12));
  BOOST_TEST(m->avg_length == 100.0, tt::tolerance(1e-12));
  BOOST_TEST_REQUIRE(m->pass_k.has_value());
  BOOST_TEST(*m->pass_k == 0.5, tt::tolerance(1e-12));
  BOOST_TEST(m->k == 4);
  const auto n = rl::named(*m);
  BOOST_TEST_REQUIRE(n.size() == 3u);
  BOOST_TEST(n[0].first == "validation/accuracy");
  BOOST_TEST(n[2].first == "validation/pass_k");
}

BOOST_AUTO_TEST_CASE(validation_with_one_generation_per_prompt_has_no_pass_k) {
  const auto m = rl::compute_validation_metrics(std::vector<double>{1, 0, 1}, std::vector<std::int64_t>{1, 2, 3}, 1);
  BOOST_TEST_REQUIRE(static_cast<bool>(m));
  BOOST_TEST(m->accuracy == 2.0 / 3.0, tt::tolerance(1e-12));
  BOOST_TEST(!m->pass_k.has_value());
  BOOST_TEST(rl::named(*m).size() == 2u);
}

BOOST_AUTO_TEST_CASE(validation_samples_that_are_not_whole_prompts_are_refused) {
  const auto m = rl::compute_validation_metrics(std::vector<double>{1, 0, 1}, std::vector<std::int64_t>{1, 2, 3}, 2);
  BOOST_TEST_REQUIRE(!m);
  BOOST_TEST(m.error().message == "3 validation samples are not a whole number of prompts of 2 generations");
}

BOOST_AUTO_TEST_CASE(dynamic_sampling_metrics_are_named_as_nemo_rl_logs_them) {
  const auto n = rl::named(rl::dynamic_sampling_metrics{3, 40});
  BOOST_TEST_REQUIRE(n.size() == 2u);
  BOOST_TEST(n[0].first == "train/dynamic_sampling_num_gen_batches");
  BOOST_TEST(n[0].second == 3.0);
  BOOST_TEST(n[1].first == "train/dynamic_sampling_num_discarded_valid_samples");
  BOOST_TEST(n[1].second == 40.0);
}

BOOST_AUTO_TEST_CASE(train_metrics_without_samples_are_refused) {
  const auto m = rl::compute_train_reward_metrics(std::vector<double>{}, std::vector<std::int64_t>{},
                                                  std::vector<double>{1.0});
  BOOST_TEST_REQUIRE(!m);
  BOOST_TEST(m.error().message == "generated_total_rewards holds no samples");
}

BOOST_AUTO_TEST_SUITE_END()
