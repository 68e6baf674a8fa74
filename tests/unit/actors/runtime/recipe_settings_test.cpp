// The recipe keys that configure the engines reach them: each key set to a value of its own lands
// in the settings the controller and every member derive from the same recipe.
#include <boost/test/unit_test.hpp>

#include "actors/runtime/recipe_settings.hpp"
#include "orchestration/config/resolve.h"
#include "support/small_recipe.h"

namespace tc = tandem::config;
namespace tg = tandem::gpu;

namespace {

/// The small recipe of the unit tests with `overrides`.
tc::recipe_config recipe_of(const std::vector<std::string>& overrides) { return tandem::test::small_recipe(overrides); }

}  // namespace

BOOST_AUTO_TEST_SUITE(recipe_settings_test)

BOOST_AUTO_TEST_CASE(the_kl_keys_reach_the_policy_gradient_loss) {
  const auto l = tandem::loss_settings(recipe_of({"loss_fn.reference_policy_kl_penalty=0.05", "loss_fn.kl_input_clamp_value=7.5",
                                                  "loss_fn.kl_output_clamp_value=2.5",
                                                  "loss_fn.use_on_policy_kl_approximation=true"}));
  BOOST_TEST(l.kl_beta == 0.05);
  BOOST_TEST(l.kl_input_clamp == 7.5);
  BOOST_TEST(l.kl_output_clamp == 2.5);
  BOOST_TEST(l.use_on_policy_kl_approximation);
  const auto d = tandem::loss_settings(recipe_of({}));
  BOOST_TEST(d.kl_beta == 0.0);
  BOOST_TEST(!d.use_on_policy_kl_approximation);
}

BOOST_AUTO_TEST_CASE(the_loss_keys_reach_the_policy_gradient_loss) {
  const auto l = tandem::loss_settings(recipe_of({"loss_fn.ratio_clip_min=0.15", "loss_fn.ratio_clip_max=0.35",
                                                  "loss_fn.ratio_clip_c=4.0", "loss_fn.use_importance_sampling_correction=true",
                                                  "loss_fn.truncated_importance_sampling_type=icepop",
                                                  "loss_fn.truncated_importance_sampling_ratio=3.0",
                                                  "loss_fn.truncated_importance_sampling_ratio_min=0.25",
                                                  "loss_fn.token_level_loss=false", "loss_fn.force_on_policy_ratio=true"}));
  BOOST_TEST(l.ratio_clip_min == 0.15);
  BOOST_TEST(l.ratio_clip_max == 0.35);
  BOOST_TEST(l.ratio_clip_c.value_or(0) == 4.0);
  BOOST_TEST((l.importance == tg::ops::importance_correction::icepop));
  BOOST_TEST(l.is_ratio_max == 3.0);
  BOOST_TEST(l.is_ratio_min == 0.25);
  BOOST_TEST(!l.token_level_loss);
  BOOST_TEST(l.force_on_policy_ratio);
  // Without a cap the correction is the plain ratio; off by default.
  BOOST_TEST((tandem::loss_settings(recipe_of({"loss_fn.use_importance_sampling_correction=true"})).importance ==
              tg::ops::importance_correction::plain));
  const auto d = tandem::loss_settings(recipe_of({}));
  BOOST_TEST((d.importance == tg::ops::importance_correction::off));
  BOOST_TEST(!d.ratio_clip_c.has_value());
  BOOST_TEST(d.token_level_loss);
  BOOST_TEST((tandem::loss_settings(recipe_of({"loss_fn.use_importance_sampling_correction=true",
                                               "loss_fn.truncated_importance_sampling_ratio=2.0"}))
                  .importance == tg::ops::importance_correction::tis));
}

BOOST_AUTO_TEST_CASE(the_sampling_keys_reach_generation_and_scoring) {
  const auto s = tandem::sampling_settings(
      recipe_of({"policy.generation.temperature=0.7", "policy.generation.top_p=0.9", "policy.generation.top_k=20"}));
  BOOST_TEST(s.temperature == 0.7);
  BOOST_TEST(s.top_p == 0.9);
  BOOST_TEST(s.top_k == 20);
  BOOST_TEST(tandem::sampling_settings(recipe_of({})).top_k == 0);  // null: no top-k
}

BOOST_AUTO_TEST_CASE(the_optimizer_scheduler_and_recompute_keys_reach_every_train_engine) {
  const auto o = tandem::train_engine_settings(recipe_of(
      {"policy.optimizer.lr=2e-5", "policy.optimizer.weight_decay=0.3", "policy.optimizer.beta1=0.8",
       "policy.optimizer.beta2=0.95", "policy.optimizer.eps=1e-6", "policy.optimizer.master_weights_dtype=bfloat16",
       "policy.optimizer.first_moment_dtype=bfloat16", "policy.optimizer.second_moment_dtype=bfloat16",
       "policy.scheduler.warmup_steps=7", "policy.scheduler.warmup_start_factor=0.5", "policy.max_grad_norm=0.5",
       "policy.recompute_granularity=selective", "policy.logprob_chunk_size=96"}));
  BOOST_TEST(o.adamw.lr == 2e-5);
  BOOST_TEST(o.adamw.weight_decay == 0.3);
  BOOST_TEST(o.adamw.beta1 == 0.8);
  BOOST_TEST(o.adamw.beta2 == 0.95);
  BOOST_TEST(o.adamw.eps == 1e-6);
  BOOST_TEST((o.master_dtype == tg::dtype::bfloat16));
  BOOST_TEST((o.first_moment_dtype == tg::dtype::bfloat16));
  BOOST_TEST((o.second_moment_dtype == tg::dtype::bfloat16));
  BOOST_TEST(o.warmup_steps == 7);
  BOOST_TEST(o.warmup_start_factor == 0.5);
  BOOST_TEST(o.max_grad_norm == 0.5);
  BOOST_TEST((o.recompute == tg::recompute_mode::selective));
  BOOST_TEST(o.logprob_chunk_rows == 96);
  // The schedule the engines apply: half the rate at step 0, the full rate from step 7.
  BOOST_TEST(tg::scheduled_lr(o, 0) == 1e-5);
  BOOST_TEST(tg::scheduled_lr(o, 7) == 2e-5);
  BOOST_TEST(tandem::train_engine_settings(recipe_of({"policy.max_grad_norm=null"})).max_grad_norm == 0.0);  // no clipping
  BOOST_TEST((tandem::train_engine_settings(recipe_of({"policy.recompute_granularity=full"})).recompute ==
              tg::recompute_mode::full));
}

BOOST_AUTO_TEST_CASE(the_micro_batch_token_budget_is_train_micro_batch_size_full_length_samples) {
  BOOST_TEST(tandem::micro_batch_token_budget(
                 recipe_of({"policy.train_micro_batch_size=2", "policy.max_total_sequence_length=100"})) == 200);
}

BOOST_AUTO_TEST_CASE(the_refit_bucket_is_bucket_mb_mebibytes) {
  BOOST_TEST(tandem::refit_bucket_bytes(recipe_of({"policy.refit.bucket_mb=3"})) == 3 * (1 << 20));
}

BOOST_AUTO_TEST_SUITE_END()
