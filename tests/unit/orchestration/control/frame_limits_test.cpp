// The controller's frame limit follows the recipe: a small run's controller holds no more than
// 16 MiB for a stranger, and a large run's every legitimate result still fits.
#include <boost/test/unit_test.hpp>

#include <string>

#include "orchestration/config/resolve.h"
#include "orchestration/control/codec.hpp"
#include "orchestration/control/frame_limits.hpp"

namespace tc = tandem::control;

namespace {

tandem::config::recipe_config recipe(const std::vector<std::string>& overrides) {
  auto r = tandem::config::resolve_recipe(std::string(TANDEM_SOURCE_DIR) + "/configs/recipes/tiny-fake-cpu.yaml", overrides);
  BOOST_TEST_REQUIRE(r.errors.empty(), tandem::config::to_string(r.errors));
  return r.recipe->config;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(frame_limits_test)

BOOST_AUTO_TEST_CASE(a_small_runs_controller_accepts_frames_of_16_mib_at_most) {
  BOOST_TEST(tc::controller_frame_limit(recipe({})) == std::size_t{16} << 20);
}

BOOST_AUTO_TEST_CASE(a_large_runs_whole_step_of_generations_fits_under_its_limit_and_the_codec_ceiling_caps_it) {
  const auto large = recipe({"grpo.num_prompts_per_step=64", "grpo.num_generations_per_prompt=16",
                             "policy.generation.max_new_tokens=2048", "policy.max_total_sequence_length=4096"});
  const std::size_t limit = tc::controller_frame_limit(large);
  BOOST_TEST(limit > std::size_t{16} << 20);
  tc::generate_result every;  // one rollout worker returning every sequence of the step at full length
  for (std::uint64_t s = 0; s < 64 * 16; ++s)
    every.sequences.push_back({s, std::vector<std::int32_t>(2048, 1), std::vector<float>(2048, -1.0f), tc::finish_reason::length, 0});
  const auto frame = tc::encode(every);
  BOOST_TEST_REQUIRE(frame.ok());
  BOOST_TEST(frame.value().size() <= limit);
  BOOST_TEST(2 * frame.value().size() >= limit / 2, "the limit should follow the recipe, not be far above it");
  // 65536 rollouts of 16384 tokens: 2^30 tokens, within a packed batch's reach, far past the ceiling.
  const auto huge = recipe({"grpo.num_prompts_per_step=1024", "grpo.num_generations_per_prompt=64",
                            "policy.generation.max_new_tokens=8192", "policy.max_total_sequence_length=16384"});
  BOOST_TEST(tc::controller_frame_limit(huge) == tc::max_frame_bytes);
}

BOOST_AUTO_TEST_CASE(a_dynamic_sampling_round_of_batch_multiplier_steps_fits_under_its_limit) {
  // 32 prompts x 4 (batch_multiplier) x 16 generations of 1024 tokens: 2048 sequences in one round,
  // about 16.8 MB from one rollout worker, above the 16 MiB a step's 512 sequences would allow.
  const auto r = recipe({"grpo.num_prompts_per_step=32", "grpo.num_generations_per_prompt=16",
                         "grpo.use_dynamic_sampling=true", "grpo.batch_multiplier=4", "policy.train_global_batch_size=512",
                         "policy.generation.max_new_tokens=1024", "policy.max_total_sequence_length=2048"});
  tc::generate_result round;
  for (std::uint64_t s = 0; s < 32 * 4 * 16; ++s)
    round.sequences.push_back({s, std::vector<std::int32_t>(1024, 1), std::vector<float>(1024, -1.0f), tc::finish_reason::length, 0});
  const auto frame = tc::encode(round);
  BOOST_TEST_REQUIRE(frame.ok());
  BOOST_TEST(frame.value().size() > std::size_t{16} << 20);
  BOOST_TEST(frame.value().size() <= tc::controller_frame_limit(r));
}

BOOST_AUTO_TEST_CASE(a_validation_round_of_val_batch_size_responses_fits_under_its_limit) {
  const auto r = recipe({"grpo.val_period=5", "grpo.val_batch_size=4096", "grpo.max_val_samples=4096",
                         "policy.generation.max_new_tokens=1024", "policy.max_total_sequence_length=2048"});
  BOOST_TEST(tc::controller_frame_limit(r) >= std::size_t{4096} * (25 + 8 * 1024));
}

BOOST_AUTO_TEST_SUITE_END()
