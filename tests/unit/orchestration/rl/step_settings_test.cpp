// Step settings from a recipe: the counts and products a step needs, the reward, baseline,
// advantage and dynamic-sampling settings carried over, the optimizer steps per GRPO step;
// a batch that does not divide, an overflowing product and unusable settings are refused.
#include <boost/test/unit_test.hpp>

#include <cstdint>

#include "orchestration/config/recipe.h"
#include "orchestration/rl/step_settings.h"

namespace rl = tandem::rl;
namespace tc = tandem::config;

namespace {

/// The Gemma 4 E2B DAPO recipe's grpo and batch values.
tc::recipe_config gemma4_dapo() {
  tc::recipe_config r;
  auto& g = r.grpo;
  g.num_prompts_per_step = 32;
  g.num_generations_per_prompt = 16;
  g.normalize_rewards = true;
  g.use_leave_one_out_baseline = false;
  g.use_dynamic_sampling = true;
  g.batch_multiplier = 3;
  g.dynamic_sampling_max_gen_batches = 10;
  g.reward_scaling = {true, 0.0, 1.0, -1.0, 1.0};
  g.reward_shaping = {true, 384, 1.0, 2048};
  g.overlong_filtering = false;
  r.policy.train_global_batch_size = 512;
  return r;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(step_settings_test)

BOOST_AUTO_TEST_CASE(a_gemma4_dapo_recipe_gives_512_samples_per_step_from_rounds_of_96_prompts) {
  const auto s = rl::make_step_settings(gemma4_dapo());
  BOOST_TEST_REQUIRE(static_cast<bool>(s), (s ? "" : s.error().message));
  BOOST_TEST(s->samples_per_step == 512);
  BOOST_TEST(s->prompts_per_round == 96);
  BOOST_TEST(s->samples_per_round == 1536);
  BOOST_TEST(s->optimizer_steps_per_step == 1);
  BOOST_TEST((s->baseline == rl::baseline_kind::mean));
  BOOST_TEST(s->advantages.normalize_rewards);
  BOOST_TEST(!s->advantages.clip_low.has_value());
  BOOST_TEST(s->use_dynamic_sampling);
  BOOST_TEST(s->dynamic_sampling.target_samples == 512);
  BOOST_TEST(s->dynamic_sampling.max_gen_batches == 10);
  BOOST_TEST(s->scaling.enabled);
  BOOST_TEST(s->scaling.target_min == -1.0);
  BOOST_TEST(s->shaping.overlong_buffer_length == 384);
  BOOST_TEST(s->shaping.max_response_length == 2048);
}

BOOST_AUTO_TEST_CASE(without_dynamic_sampling_a_round_is_the_steps_prompts_whatever_the_batch_multiplier) {
  auto r = gemma4_dapo();
  r.grpo.use_dynamic_sampling = false;
  r.grpo.use_leave_one_out_baseline = true;
  r.grpo.advantage_clip_low = -5.0;
  r.grpo.advantage_clip_high = 5.0;
  const auto s = rl::make_step_settings(r);
  BOOST_TEST_REQUIRE(static_cast<bool>(s));
  BOOST_TEST(s->prompts_per_round == 32);
  BOOST_TEST(s->samples_per_round == 512);
  BOOST_TEST((s->baseline == rl::baseline_kind::leave_one_out));
  BOOST_TEST((s->dynamic_sampling.kind == rl::baseline_kind::leave_one_out));
  BOOST_TEST(*s->advantages.clip_low == -5.0);
}

BOOST_AUTO_TEST_CASE(a_global_batch_below_the_steps_samples_gives_several_optimizer_steps) {
  auto r = gemma4_dapo();
  r.policy.train_global_batch_size = 128;
  const auto s = rl::make_step_settings(r);
  BOOST_TEST_REQUIRE(static_cast<bool>(s));
  BOOST_TEST(s->optimizer_steps_per_step == 4);
}

BOOST_AUTO_TEST_CASE(a_global_batch_that_does_not_divide_the_steps_samples_is_refused_naming_both) {
  auto r = gemma4_dapo();
  r.policy.train_global_batch_size = 384;
  const auto s = rl::make_step_settings(r);
  BOOST_TEST_REQUIRE(!s);
  BOOST_TEST((s.error().code == rl::rl_errc::does_not_divide));
  BOOST_TEST(s.error().message ==
             "the step's 512 samples (grpo.num_prompts_per_step x grpo.num_generations_per_prompt) do not split into "
             "whole global batches of policy.train_global_batch_size = 384 samples");
}

BOOST_AUTO_TEST_CASE(a_sample_count_past_int64_is_refused_as_an_overflow) {
  auto r = gemma4_dapo();
  r.grpo.num_prompts_per_step = std::int64_t{1} << 40;
  r.grpo.num_generations_per_prompt = std::int64_t{1} << 40;
  const auto s = rl::make_step_settings(r);
  BOOST_TEST_REQUIRE(!s);
  BOOST_TEST((s.error().code == rl::rl_errc::count_overflow));
  BOOST_TEST(s.error().message == "grpo.num_prompts_per_step x grpo.num_generations_per_prompt overflows int64");
}

BOOST_AUTO_TEST_CASE(unusable_reward_or_advantage_settings_are_refused) {
  auto r = gemma4_dapo();
  r.grpo.reward_scaling.source_max = -1.0;
  const auto scaling = rl::make_step_settings(r);
  BOOST_TEST_REQUIRE(!scaling);
  BOOST_TEST((scaling.error().code == rl::rl_errc::invalid_setting));
  r = gemma4_dapo();
  r.grpo.advantage_clip_low = 1.0;
  r.grpo.advantage_clip_high = -1.0;
  const auto clip = rl::make_step_settings(r);
  BOOST_TEST_REQUIRE(!clip);
  BOOST_TEST(clip.error().message == "advantage_clip_low (1) is above advantage_clip_high (-1)");
}

BOOST_AUTO_TEST_SUITE_END()
