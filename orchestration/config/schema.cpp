// The recipe schema, declared in one place: key, type, default, range, description, binding.
// Defaults follow NeMo-RL's GRPO parent recipe (grpo_math_1B.yaml) where tandem has the same key;
// DAPO settings live in configs/recipes/base/dapo-gemma4.yaml.
#include "orchestration/config/schema.h"

#include <set>

#include "orchestration/config/schema_builder.h"

namespace tandem::config {
namespace {

using internal::key;
using R = recipe_config;

// Upper bounds keep each value within the type it travels in or multiplies into: steps within the
// 32-bit step of every sampling seed, token counts and lengths within 2^24 (a packed batch's
// offsets are 32-bit), token ids and top_k within int32, batch sizes within 2^20 per pass, and
// products (rollouts x length, devices) within the checked rules of rules.cpp.
void declare_grpo(schema& s) {
  key(s, "grpo.num_prompts_per_step", "Prompts drawn from the dataset per step").integer(32).at_least(1)
      .at_most(1 << 20).to([](R& r) -> auto& { return r.grpo.num_prompts_per_step; })
      .shown_by("tests/integration/runtime/rl_run_test.cpp: a_colocated_run_trains_every_step_on_trajectories_of_the_newest_weights_with_identical_policy_ranks");
  key(s, "grpo.num_generations_per_prompt", "Samples per prompt (the GRPO group size)").integer(16)
      .at_least(2).at_most(1 << 16).to([](R& r) -> auto& { return r.grpo.num_generations_per_prompt; })
      .shown_by("tests/integration/runtime/rl_run_test.cpp: a_colocated_run_trains_every_step_on_trajectories_of_the_newest_weights_with_identical_policy_ranks");
  key(s, "grpo.max_num_steps", "Stop after this many steps").integer(1000000).at_least(1)
      .to([](R& r) -> auto& { return r.grpo.max_num_steps; })
      .shown_by("tests/integration/runtime/rl_run_test.cpp: a_colocated_run_trains_every_step_on_trajectories_of_the_newest_weights_with_identical_policy_ranks").at_most(4294967295.0);
  key(s, "grpo.max_num_epochs", "Stop after this many passes over the training prompts (the run ends at the first of this and grpo.max_num_steps)").integer(1)
      .at_least(1).to([](R& r) -> auto& { return r.grpo.max_num_epochs; })
      .shown_by("tests/integration/runtime/task_run_test.cpp: a_run_ends_after_max_num_epochs_passes_over_its_dataset").at_most(4294967295.0);
  key(s, "grpo.normalize_rewards", "Divide advantages by the group's reward std").boolean(false)
      .to([](R& r) -> auto& { return r.grpo.normalize_rewards; })
      .shown_by("tests/integration/runtime/recipe_effects_test.cpp: reward_keys_shape_clip_and_filter_what_a_run_trains_on_and_tensorboard_records_every_step; tests/actors/driver/step_rewards_test.cpp: normalised advantages divide by the std of the unshaped rewards and the clips clamp them");
  key(s, "grpo.use_leave_one_out_baseline", "Baseline each sample on the other samples of its group (RLOO)")
      .boolean(false).to([](R& r) -> auto& { return r.grpo.use_leave_one_out_baseline; })
      .shown_by("tests/integration/runtime/recipe_effects_test.cpp: reward_keys_shape_clip_and_filter_what_a_run_trains_on_and_tensorboard_records_every_step; tests/actors/driver/step_rewards_test.cpp: the leave one out baseline takes the others of the group and a group of agreeing others has std 0");
  key(s, "grpo.use_dynamic_sampling", "DAPO: keep only groups whose rewards differ, generate until the batch is full")
      .boolean(false).to([](R& r) -> auto& { return r.grpo.use_dynamic_sampling; })
      .shown_by("tests/integration/runtime/gemma4_run_test.cpp: a_gemma4_run_with_dynamic_sampling_trains_on_groups_whose_rewards_differ_and_counts_its_rounds; tests/actors/driver/driver_test.cpp: dynamic sampling that runs out of generation rounds fails the step saying so");
  key(s, "grpo.batch_multiplier", "Prompts per generation round = num_prompts_per_step x this (dynamic sampling)")
      .integer(1).at_least(1).to([](R& r) -> auto& { return r.grpo.batch_multiplier; })
      .shown_by("tests/integration/runtime/gemma4_run_test.cpp: a_gemma4_run_with_dynamic_sampling_trains_on_groups_whose_rewards_differ_and_counts_its_rounds").at_most(1024);
  key(s, "grpo.dynamic_sampling_max_gen_batches", "Fail the step after this many generation rounds without a full batch")
      .integer(10).at_least(1).to([](R& r) -> auto& { return r.grpo.dynamic_sampling_max_gen_batches; })
      .shown_by("tests/actors/driver/driver_test.cpp: dynamic sampling that runs out of generation rounds fails the step saying so").at_most(65536);
  key(s, "grpo.reward_scaling.enabled", "Clamp rewards to [source_min, source_max] and map them onto [target_min, target_max]")
      .boolean(false).to([](R& r) -> auto& { return r.grpo.reward_scaling.enabled; })
      .shown_by("tests/integration/runtime/recipe_effects_test.cpp: reward_keys_shape_clip_and_filter_what_a_run_trains_on_and_tensorboard_records_every_step; tests/actors/driver/step_rewards_test.cpp: dapo rewards are scaled then shaped and the baseline averages the shaped rewards");
  key(s, "grpo.reward_scaling.source_min", "Lower end of the raw reward range").real(0.0)
      .to([](R& r) -> auto& { return r.grpo.reward_scaling.source_min; })
      .shown_by("tests/integration/runtime/recipe_effects_test.cpp: reward_keys_shape_clip_and_filter_what_a_run_trains_on_and_tensorboard_records_every_step");
  key(s, "grpo.reward_scaling.source_max", "Upper end of the raw reward range").real(1.0)
      .to([](R& r) -> auto& { return r.grpo.reward_scaling.source_max; })
      .shown_by("tests/integration/runtime/recipe_effects_test.cpp: reward_keys_shape_clip_and_filter_what_a_run_trains_on_and_tensorboard_records_every_step");
  key(s, "grpo.reward_scaling.target_min", "Scaled reward of source_min").real(0.0)
      .to([](R& r) -> auto& { return r.grpo.reward_scaling.target_min; })
      .shown_by("tests/integration/runtime/recipe_effects_test.cpp: reward_keys_shape_clip_and_filter_what_a_run_trains_on_and_tensorboard_records_every_step");
  key(s, "grpo.reward_scaling.target_max", "Scaled reward of source_max").real(1.0)
      .to([](R& r) -> auto& { return r.grpo.reward_scaling.target_max; })
      .shown_by("tests/integration/runtime/recipe_effects_test.cpp: reward_keys_shape_clip_and_filter_what_a_run_trains_on_and_tensorboard_records_every_step");
  key(s, "grpo.reward_shaping.enabled", "DAPO overlong shaping: penalise responses that run into the overlong buffer")
      .boolean(false).to([](R& r) -> auto& { return r.grpo.reward_shaping.enabled; })
      .shown_by("tests/integration/runtime/recipe_effects_test.cpp: reward_keys_shape_clip_and_filter_what_a_run_trains_on_and_tensorboard_records_every_step; tests/actors/driver/step_rewards_test.cpp: dapo rewards are scaled then shaped and the baseline averages the shaped rewards");
  key(s, "grpo.reward_shaping.overlong_buffer_length", "Tokens before max_response_length over which the penalty ramps up")
      .integer(128).at_least(1).to([](R& r) -> auto& { return r.grpo.reward_shaping.overlong_buffer_length; })
      .shown_by("tests/integration/runtime/recipe_effects_test.cpp: reward_keys_shape_clip_and_filter_what_a_run_trains_on_and_tensorboard_records_every_step").at_most(1 << 24);
  key(s, "grpo.reward_shaping.overlong_buffer_penalty", "Penalty at max_response_length").real(1.0)
      .at_least(0).to([](R& r) -> auto& { return r.grpo.reward_shaping.overlong_buffer_penalty; })
      .shown_by("tests/integration/runtime/recipe_effects_test.cpp: reward_keys_shape_clip_and_filter_what_a_run_trains_on_and_tensorboard_records_every_step");
  key(s, "grpo.reward_shaping.max_response_length", "Response length at which the full penalty applies")
      .integer(2048).at_least(1).to([](R& r) -> auto& { return r.grpo.reward_shaping.max_response_length; })
      .shown_by("tests/integration/runtime/recipe_effects_test.cpp: reward_keys_shape_clip_and_filter_what_a_run_trains_on_and_tensorboard_records_every_step").at_most(1 << 24);
  key(s, "grpo.overlong_filtering", "Exclude truncated samples from the loss").boolean(false)
      .to([](R& r) -> auto& { return r.grpo.overlong_filtering; })
      .shown_by("tests/integration/runtime/recipe_effects_test.cpp: reward_keys_shape_clip_and_filter_what_a_run_trains_on_and_tensorboard_records_every_step; tests/actors/driver/step_rewards_test.cpp: overlong filtering gives the truncated trajectories a loss multiplier of 0");
  key(s, "grpo.advantage_clip_low", "Clamp advantages from below (null: no clamp)").real(0).null_default()
      .to([](R& r) -> auto& { return r.grpo.advantage_clip_low; })
      .shown_by("tests/integration/runtime/recipe_effects_test.cpp: reward_keys_shape_clip_and_filter_what_a_run_trains_on_and_tensorboard_records_every_step; tests/actors/driver/step_rewards_test.cpp: normalised advantages divide by the std of the unshaped rewards and the clips clamp them");
  key(s, "grpo.advantage_clip_high", "Clamp advantages from above (null: no clamp)").real(0).null_default()
      .to([](R& r) -> auto& { return r.grpo.advantage_clip_high; })
      .shown_by("tests/integration/runtime/recipe_effects_test.cpp: reward_keys_shape_clip_and_filter_what_a_run_trains_on_and_tensorboard_records_every_step; tests/actors/driver/step_rewards_test.cpp: normalised advantages divide by the std of the unshaped rewards and the clips clamp them");
  key(s, "grpo.max_trajectory_age_steps", "0: synchronous GRPO; 1: generation of step n+1 overlaps training of step n")
      .integer(0).at_least(0).at_most(1).to([](R& r) -> auto& { return r.grpo.max_trajectory_age_steps; })
      .shown_by("tests/integration/runtime/gemma4_run_test.cpp: a_dedicated_gemma4_run_one_step_off_policy_trains_on_batches_one_version_old_generated_while_the_previous_step_trains");
  key(s, "grpo.val_period", "Validate every this many steps (0: never)").integer(0).at_least(0)
      .to([](R& r) -> auto& { return r.grpo.val_period; })
      .shown_by("tests/integration/runtime/validation_run_test.cpp: a_run_with_val_period_2_over_4_steps_records_validation_accuracy_after_steps_2_and_4").at_most(4294967295.0);
  key(s, "grpo.val_at_start", "Validate before the first step").boolean(false)
      .to([](R& r) -> auto& { return r.grpo.val_at_start; })
      .shown_by("tests/integration/runtime/validation_run_test.cpp: val_at_start_records_a_validation_pass_at_step_0_with_the_initial_weights");
  key(s, "grpo.val_at_end", "Validate after the last step").boolean(false)
      .to([](R& r) -> auto& { return r.grpo.val_at_end; })
      .shown_by("tests/integration/runtime/validation_run_test.cpp: val_at_end_validates_after_the_last_step_once_even_when_val_period_also_falls_on_it");
  key(s, "grpo.max_val_samples", "Validation prompts per validation").integer(256).at_least(1)
      .to([](R& r) -> auto& { return r.grpo.max_val_samples; })
      .shown_by("tests/integration/runtime/validation_run_test.cpp: a_run_with_val_period_2_over_4_steps_records_validation_accuracy_after_steps_2_and_4; tests/unit/actors/runtime/engine_factory_test.cpp: the_validation_prompts_are_max_val_samples_parity_prompts_of_another_seed_than_training").at_most(1 << 20);
  key(s, "grpo.val_batch_size", "Validation prompts generated at once (a round)").integer(256).at_least(1)
      .to([](R& r) -> auto& { return r.grpo.val_batch_size; })
      .shown_by("tests/integration/runtime/validation_run_test.cpp: a_run_with_val_period_2_over_4_steps_records_validation_accuracy_after_steps_2_and_4; tests/actors/driver/validation_test.cpp: rounds of batch_size prompts cover every validation prompt once with prompt k on rollout worker k mod R").at_most(1 << 20);
  key(s, "grpo.seed", "Seed of every random stream (data order, sampling)").integer(42).at_least(0)
      .to([](R& r) -> auto& { return r.grpo.seed; })
      .shown_by("tests/unit/actors/runtime/engine_factory_test.cpp: the_fake_model_follows_fake_weight_mb_the_seed_and_the_sequence_length; tests/integration/runtime/rl_run_test.cpp: a_colocated_run_trains_every_step_on_trajectories_of_the_newest_weights_with_identical_policy_ranks");
}

void declare_loss(schema& s) {
  key(s, "loss_fn.reference_policy_kl_penalty", "Weight of the k3 KL term against the initial policy (0: off)")
      .real(0.0).at_least(0).to([](R& r) -> auto& { return r.loss_fn.reference_policy_kl_penalty; })
      .shown_by("tests/integration/runtime/gemma4_run_test.cpp: a_gemma4_run_with_two_optimizer_steps_per_step_and_the_kl_term_clips_its_later_steps_and_pays_kl_to_the_reference");
  key(s, "loss_fn.kl_input_clamp_value", "Clamp of the log-ratio fed to the KL estimate").real(20.0)
      .above(0).to([](R& r) -> auto& { return r.loss_fn.kl_input_clamp_value; })
      .shown_by("tests/unit/actors/runtime/recipe_settings_test.cpp: the_kl_keys_reach_the_policy_gradient_loss; tests/unit/gpu/ops/pg_loss_test.cpp: kl_in_score_function_form_adds_k3_itself_to_the_finite_difference_gradient");
  key(s, "loss_fn.kl_output_clamp_value", "Clamp of the per-token KL estimate").real(10.0).above(0)
      .to([](R& r) -> auto& { return r.loss_fn.kl_output_clamp_value; })
      .shown_by("tests/unit/actors/runtime/recipe_settings_test.cpp: the_kl_keys_reach_the_policy_gradient_loss; tests/unit/gpu/ops/pg_loss_test.cpp: kl_in_score_function_form_adds_k3_itself_to_the_finite_difference_gradient");
  key(s, "loss_fn.ratio_clip_min", "PPO ratio lower clip: 1 - ratio_clip_min").real(0.2).at_least(0)
      .below(1).to([](R& r) -> auto& { return r.loss_fn.ratio_clip_min; })
      .shown_by("tests/unit/actors/runtime/recipe_settings_test.cpp: the_loss_keys_reach_the_policy_gradient_loss; tests/unit/gpu/ops/pg_loss_test.cpp: the_low_clip_fires_for_negative_advantages_below_one_minus_clip_min_and_stops_their_gradient");
  key(s, "loss_fn.ratio_clip_max", "PPO ratio upper clip: 1 + ratio_clip_max (DAPO clip-higher: 0.28)")
      .real(0.2).at_least(0).to([](R& r) -> auto& { return r.loss_fn.ratio_clip_max; })
      .shown_by("tests/unit/actors/runtime/recipe_settings_test.cpp: the_loss_keys_reach_the_policy_gradient_loss; tests/unit/gpu/ops/pg_loss_test.cpp: the_high_clip_fires_for_positive_advantages_above_one_plus_clip_max_and_stops_their_gradient");
  key(s, "loss_fn.ratio_clip_c", "Dual-clip bound c > 1 for negative advantages (null: off)").real(0)
      .null_default().above(1).to([](R& r) -> auto& { return r.loss_fn.ratio_clip_c; })
      .shown_by("tests/unit/actors/runtime/recipe_settings_test.cpp: the_loss_keys_reach_the_policy_gradient_loss; tests/unit/gpu/ops/pg_loss_test.cpp: the_dual_clip_caps_negative_advantage_losses_at_minus_a_c_and_stops_their_gradient");
  key(s, "loss_fn.use_importance_sampling_correction", "Weight tokens by the trainer/generator probability ratio")
      .boolean(false).to([](R& r) -> auto& { return r.loss_fn.use_importance_sampling_correction; })
      .shown_by("tests/unit/actors/runtime/recipe_settings_test.cpp: the_loss_keys_reach_the_policy_gradient_loss; tests/unit/gpu/ops/pg_loss_test.cpp: tis_truncates_importance_weights_above_the_cap_and_scales_the_gradient_by_the_cap");
  key(s, "loss_fn.truncated_importance_sampling_type", "How the importance weight is bounded")
      .choice<importance_sampling_type>({{"tis", importance_sampling_type::tis},
                                         {"icepop", importance_sampling_type::icepop},
                                         {"seq-mask-tis", importance_sampling_type::seq_mask_tis}},
                                        "tis", [](R& r) -> auto& { return r.loss_fn.truncated_importance_sampling_type; })
      .shown_by("tests/unit/actors/runtime/recipe_settings_test.cpp: the_loss_keys_reach_the_policy_gradient_loss; tests/unit/gpu/ops/pg_loss_test.cpp: icepop_zeroes_tokens_whose_importance_weight_leaves_the_bounds");
  key(s, "loss_fn.truncated_importance_sampling_ratio", "Upper bound of the importance weight (null: unbounded)")
      .real(0).null_default().above(0)
      .to([](R& r) -> auto& { return r.loss_fn.truncated_importance_sampling_ratio; })
      .shown_by("tests/unit/actors/runtime/recipe_settings_test.cpp: the_loss_keys_reach_the_policy_gradient_loss; tests/unit/gpu/ops/pg_loss_test.cpp: tis_truncates_importance_weights_above_the_cap_and_scales_the_gradient_by_the_cap");
  key(s, "loss_fn.truncated_importance_sampling_ratio_min", "Lower bound of the weight (icepop, seq-mask-tis)")
      .real(0.5).at_least(0).to([](R& r) -> auto& { return r.loss_fn.truncated_importance_sampling_ratio_min; })
      .shown_by("tests/unit/actors/runtime/recipe_settings_test.cpp: the_loss_keys_reach_the_policy_gradient_loss; tests/unit/gpu/ops/pg_loss_test.cpp: seq_mask_tis_zeroes_a_whole_sequence_whose_geometric_mean_ratio_leaves_the_bounds");
  key(s, "loss_fn.token_level_loss", "Average over all tokens of the global batch (DAPO) instead of per sequence")
      .boolean(true).to([](R& r) -> auto& { return r.loss_fn.token_level_loss; })
      .shown_by("tests/unit/actors/runtime/recipe_settings_test.cpp: the_loss_keys_reach_the_policy_gradient_loss; tests/unit/gpu/ops/pg_loss_test.cpp: sequence_level_loss_averages_each_sequence_then_divides_by_the_global_sequence_count");
  key(s, "loss_fn.use_on_policy_kl_approximation", "Weight the KL term by the trainer/generator ratio")
      .boolean(false).to([](R& r) -> auto& { return r.loss_fn.use_on_policy_kl_approximation; })
      .shown_by("tests/unit/actors/runtime/recipe_settings_test.cpp: the_kl_keys_reach_the_policy_gradient_loss; tests/unit/gpu/ops/pg_loss_test.cpp: kl_with_the_on_policy_approximation_weights_by_a_constant_exp_of_cur_minus_gen");
  key(s, "loss_fn.force_on_policy_ratio", "Use ratio 1 (skip the previous-policy logprob pass)")
      .boolean(false).to([](R& r) -> auto& { return r.loss_fn.force_on_policy_ratio; })
      .shown_by("tests/unit/actors/runtime/recipe_settings_test.cpp: the_loss_keys_reach_the_policy_gradient_loss; tests/unit/gpu/ops/pg_loss_test.cpp: force_on_policy_ratio_uses_ratio_one_with_the_gradient_of_exp_x_minus_sg_x");
}

void declare_policy(schema& s) {
  key(s, "policy.model_name", "Hugging Face checkpoint directory (relative: to the working directory, else to the recipe's folder), a preset in configs/models/ or a model in the local Hugging Face cache; runtime.engine gemma4 loads its weights")
      .string("").required().to([](R& r) -> auto& { return r.policy.model_name; })
      .shown_by("tests/unit/tools/cli/shipped_recipes_test.cpp: the_dry_run_reports_the_parameter_count_of_the_tensor_table; tests/unit/actors/runtime/engine_factory_test.cpp: runtime_engine_gemma4_builds_the_cpu_engines_over_the_checkpoint_that_policy_model_name_names; tests/integration/runtime/gemma4_run_test.cpp: a_colocated_gemma4_run_trains_every_step_with_identical_policy_ranks_and_generates_with_the_newest_weights");
  key(s, "policy.train_global_batch_size", "Samples per optimizer step, over all data-parallel ranks")
      .integer(512).at_least(1).to([](R& r) -> auto& { return r.policy.train_global_batch_size; })
      .shown_by("tests/integration/runtime/rl_run_test.cpp: a_colocated_run_trains_every_step_on_trajectories_of_the_newest_weights_with_identical_policy_ranks; tests/integration/runtime/gemma4_run_test.cpp: a_gemma4_run_with_two_optimizer_steps_per_step_and_the_kl_term_clips_its_later_steps_and_pays_kl_to_the_reference").at_most(68719476736.0);
  key(s, "policy.train_micro_batch_size", "Token budget of one forward/backward pass on one rank, in samples of max_total_sequence_length tokens: samples are packed into a pass while they fit").integer(1)
      .at_least(1).to([](R& r) -> auto& { return r.policy.train_micro_batch_size; })
      .shown_by("tests/unit/actors/runtime/recipe_settings_test.cpp: the_micro_batch_token_budget_is_train_micro_batch_size_full_length_samples; tests/actors/policy_worker/step_batch_test.cpp: micro-batches cover only the optimizer steps sequences and pack them while the budget holds").at_most(1 << 20);
  key(s, "policy.logprob_batch_size", "Samples per logprob pass on one rank (null: the rank's whole share at once)")
      .integer(0).null_default().at_least(1)
      .to([](R& r) -> auto& { return r.policy.logprob_batch_size; })
      .not_built_unless([](const R& r) { return r.policy.logprob_batch_size; }, std::optional<std::int64_t>{}, "4", "splitting a rank's logprob pass into batches is not built yet (null: the rank's whole share in one pass)").at_most(1 << 20);
  key(s, "policy.max_total_sequence_length", "Longest prompt + response in tokens").integer(4096)
      .at_least(2).to([](R& r) -> auto& { return r.policy.max_total_sequence_length; })
      .shown_by("tests/unit/actors/runtime/engine_factory_test.cpp: the_fake_model_follows_fake_weight_mb_the_seed_and_the_sequence_length; tests/unit/actors/runtime/engine_factory_test.cpp: the_kv_cache_holds_max_num_sequences_full_length_sequences_within_what_gpu_memory_utilization_leaves; tests/unit/actors/runtime/recipe_settings_test.cpp: the_micro_batch_token_budget_is_train_micro_batch_size_full_length_samples").at_most(1 << 24);
  key(s, "policy.logprob_chunk_size", "Tokens whose vocabulary logits are computed at once when scoring and in the train head (with recompute none the train head also keeps the raw logits of its whole micro-batch for the backward)")
      .integer(1024).at_least(1).to([](R& r) -> auto& { return r.policy.logprob_chunk_size; })
      .fake_ignores().shown_by("tests/unit/actors/runtime/recipe_settings_test.cpp: the_optimizer_scheduler_and_recompute_keys_reach_every_train_engine").at_most(1 << 24);
  key(s, "policy.max_grad_norm", "Clip the global gradient norm to this (null: no clipping)").real(1.0)
      .nullable().above(0).to([](R& r) -> auto& { return r.policy.max_grad_norm; })
      .shown_by("tests/unit/actors/runtime/recipe_settings_test.cpp: the_optimizer_scheduler_and_recompute_keys_reach_every_train_engine");
  key(s, "policy.offload_optimizer_for_logprob", "Move optimizer state to host memory during the logprob pass")
      .boolean(false).to([](R& r) -> auto& { return r.policy.offload_optimizer_for_logprob; })
      .not_built_unless([](const R& r) { return r.policy.offload_optimizer_for_logprob; }, false, "true", "offloading the optimizer state for the logprob pass is not built yet");
  key(s, "policy.offload_optimizer_for_generation", "Colocated: move optimizer state to host memory while generating")
      .boolean(false).to([](R& r) -> auto& { return r.policy.offload_optimizer_for_generation; })
      .shown_by("tests/integration/runtime/gemma4_run_test.cpp: offloading_the_optimizer_state_while_generating_changes_no_bit_of_a_colocated_run_and_records_the_turns; tests/gpu/runtime/colocated_cuda_run_test.cpp: a_colocated_run_on_one_gpu_generates_every_step_with_the_weights_the_trainer_just_produced");
  key(s, "policy.precision", "Dtype of the Gemma 4 engines' weights, gradients and activations: auto (float32 on "
         "cluster.backend cpu, bfloat16 on cuda), float32 (the reference's numerics on a GPU too), or bfloat16")
      .choice<compute_precision>({{"auto", compute_precision::automatic},
                                  {"float32", compute_precision::float32},
                                  {"bfloat16", compute_precision::bfloat16}},
                                 "auto", [](R& r) -> auto& { return r.policy.precision; })
      .not_built_when([](const R& r) { return r.policy.precision == compute_precision::bfloat16 && r.cluster.backend == compute_backend::cpu; },
                      "bfloat16", "bfloat16 runs on cluster.backend: cuda; the CPU computes in float32")
      .fake_ignores().shown_by("tests/unit/orchestration/topology/memory_plan_test.cpp: policy_precision_float32_on_cuda_plans_float32_weights_and_activations; tests/unit/orchestration/config/compute_dtype_test.cpp: policy_precision_auto_is_float32_on_cpu_and_bfloat16_on_cuda_and_an_explicit_value_wins");
  key(s, "policy.recompute_granularity", "Activation recompute in backward: none (every activation and the head's logits kept), selective (attention and MLP insides), full (whole layers)")
      .choice<recompute_granularity>({{"none", recompute_granularity::none},
                                      {"selective", recompute_granularity::selective},
                                      {"full", recompute_granularity::full}},
                                     "none", [](R& r) -> auto& { return r.policy.recompute; })
      .fake_ignores().shown_by("tests/unit/actors/runtime/recipe_settings_test.cpp: the_optimizer_scheduler_and_recompute_keys_reach_every_train_engine");
  key(s, "policy.tensor_parallel_size", "Tensor-parallel size of training").integer(1).at_least(1)
      .to([](R& r) -> auto& { return r.policy.tensor_parallel_size; })
      .not_built_unless([](const R& r) { return r.policy.tensor_parallel_size; }, std::int64_t{1}, "2", "tensor-parallel training is not built yet (training shards over data-parallel ranks)").at_most(65536);
  key(s, "policy.context_parallel_size", "Context-parallel size of training").integer(1).at_least(1)
      .to([](R& r) -> auto& { return r.policy.context_parallel_size; })
      .not_built_unless([](const R& r) { return r.policy.context_parallel_size; }, std::int64_t{1}, "2", "context parallelism is not built yet").at_most(65536);
  key(s, "policy.expert_parallel_size", "Expert-parallel size of training (MoE)").integer(1).at_least(1)
      .to([](R& r) -> auto& { return r.policy.expert_parallel_size; })
      .not_built_unless([](const R& r) { return r.policy.expert_parallel_size; }, std::int64_t{1}, "2", "expert parallelism is not built yet").at_most(65536);

  key(s, "policy.refit.bucket_mb", "Refit bucket size in MiB: new weights move to the generators in buckets of this size")
      .integer(512).at_least(1).at_most(65536).to([](R& r) -> auto& { return r.policy.refit.bucket_mb; })
      .shown_by("tests/unit/actors/runtime/recipe_settings_test.cpp: the_refit_bucket_is_bucket_mb_mebibytes; tests/integration/runtime/rl_run_test.cpp: the_controllers_bytes_per_step_do_not_grow_with_the_model_while_refits_take_many_buckets");
  key(s, "policy.refit.checksums", "Checksum every refit bucket and verify it before staging (debug integrity)")
      .boolean(false).to([](R& r) -> auto& { return r.policy.refit.checksums; })
      .shown_by("tests/integration/runtime/rl_run_test.cpp: a_corrupted_weight_bucket_leaves_the_rollout_workers_on_their_old_version_and_fails_the_run_saying_why");

  key(s, "policy.refit.receive", "Where a dedicated rollout worker receives new weights: staging (a second copy; the old "
         "version serves until every bucket arrived, and a failed refit leaves it live) or in_place (over the live weights, "
         "for a generator too large for two copies; a failed refit leaves the worker without weights, refusing to generate "
         "until a complete refit arrives). Colocated workers read the trainer's weights and receive no buckets")
      .choice<refit_receive_mode>({{"staging", refit_receive_mode::staging}, {"in_place", refit_receive_mode::in_place}},
                                  "staging", [](R& r) -> auto& { return r.policy.refit.receive; })
      .shown_by("tests/unit/orchestration/topology/memory_plan_test.cpp: a_dedicated_generator_plans_a_staging_copy_unless_it_receives_in_place; "
                "tests/integration/runtime/rl_run_test.cpp: a_corrupted_weight_bucket_received_in_place_leaves_the_rollout_workers_without_weights_and_fails_the_run_saying_why");

  key(s, "policy.generation.max_new_tokens", "Longest response in tokens").integer(2048).at_least(1)
      .to([](R& r) -> auto& { return r.policy.generation.max_new_tokens; })
      .shown_by("tests/integration/runtime/rl_run_test.cpp: a_colocated_run_trains_every_step_on_trajectories_of_the_newest_weights_with_identical_policy_ranks").at_most(1 << 24);
  key(s, "policy.generation.temperature", "Sampling temperature (the trainer scores at the same one)")
      .real(1.0).above(0).to([](R& r) -> auto& { return r.policy.generation.temperature; })
      .fake_ignores().shown_by("tests/unit/actors/runtime/recipe_settings_test.cpp: the_sampling_keys_reach_generation_and_scoring");
  key(s, "policy.generation.top_p", "Nucleus sampling mass (1.0: off)").real(1.0).above(0).at_most(1)
      .to([](R& r) -> auto& { return r.policy.generation.top_p; })
      .fake_ignores().shown_by("tests/unit/actors/runtime/recipe_settings_test.cpp: the_sampling_keys_reach_generation_and_scoring");
  key(s, "policy.generation.top_k", "Sample among the k most likely tokens (null: off)").integer(0)
      .null_default().at_least(1).to([](R& r) -> auto& { return r.policy.generation.top_k; })
      .fake_ignores().shown_by("tests/unit/actors/runtime/recipe_settings_test.cpp: the_sampling_keys_reach_generation_and_scoring").at_most(2147483647.0);
  key(s, "policy.generation.stop_token_ids", "Token ids that end a response (null: the model's eos ids, config.json's and generation_config.json's)")
      .integer_list().null_default().at_least(0)
      .to([](R& r) -> auto& { return r.policy.generation.stop_token_ids; })
      .shown_by("tests/integration/runtime/recipe_effects_test.cpp: stop_token_ids_end_every_response_at_its_first_stop_token; tests/unit/actors/runtime/engine_factory_test.cpp: stop_token_ids_null_ends_gemma4_responses_at_the_models_eos_ids_and_a_list_replaces_them").at_most(2147483647.0);
  key(s, "policy.generation.colocated.enabled", "Generate on the training devices (true) or on dedicated ones (false)")
      .boolean(true).to([](R& r) -> auto& { return r.policy.generation.colocated; })
      .shown_by("tests/unit/orchestration/topology/placement_test.cpp: every_colocated_member_on_one_node_hosts_both_actors_with_ranks_in_device_order; tests/integration/runtime/rl_run_test.cpp: a_dedicated_run_trains_every_step_on_trajectories_of_the_newest_weights_with_identical_policy_ranks");
  key(s, "policy.generation.colocated.resources.gpus_per_node", "Non-colocated: generation devices per node (one node: taken from the training node)")
      .integer(0).null_default().at_least(1)
      .to([](R& r) -> auto& { return r.policy.generation.resources.gpus_per_node; })
      .shown_by("tests/unit/orchestration/topology/placement_test.cpp: dedicated_generation_on_one_node_trains_on_the_first_devices_and_generates_on_the_last");
  key(s, "policy.generation.colocated.resources.num_nodes", "Non-colocated: dedicated generation nodes (several nodes)")
      .integer(0).null_default().at_least(1)
      .to([](R& r) -> auto& { return r.policy.generation.resources.num_nodes; })
      .shown_by("tests/unit/orchestration/topology/placement_test.cpp: two_rollout_nodes_out_of_three_leave_one_training_node");
  key(s, "policy.generation.gpu_memory_utilization", "Fraction of device memory generation may use (weights, KV cache, resident training state)")
      .real(0.9).above(0).at_most(1).to([](R& r) -> auto& { return r.policy.generation.gpu_memory_utilization; })
      .fake_ignores().shown_by("tests/unit/orchestration/topology/memory_plan_test.cpp: the_kv_cache_gets_the_usable_memory_minus_the_rest_of_generation; tests/unit/actors/runtime/engine_factory_test.cpp: the_kv_cache_holds_max_num_sequences_full_length_sequences_within_what_gpu_memory_utilization_leaves");
  key(s, "policy.generation.max_num_sequences", "Sequences one generator decodes at once").integer(256)
      .at_least(1).to([](R& r) -> auto& { return r.policy.generation.max_num_sequences; })
      .shown_by("tests/unit/gpu/engine/fake_engines_test.cpp: generation_respects_max_num_sequences_and_every_token_comes_from_the_reported_version; tests/unit/actors/runtime/engine_factory_test.cpp: the_kv_cache_holds_max_num_sequences_full_length_sequences_within_what_gpu_memory_utilization_leaves").at_most(1 << 20);
  key(s, "policy.generation.tensor_parallel_size", "Devices one generator spans").integer(1).at_least(1)
      .to([](R& r) -> auto& { return r.policy.generation.tensor_parallel_size; })
      .not_built_unless([](const R& r) { return r.policy.generation.tensor_parallel_size; }, std::int64_t{1}, "2", "tensor-parallel generation is not built yet (each generator holds the whole model on one device)").at_most(65536);

  key(s, "policy.optimizer.lr", "AdamW learning rate of the RL phase after the scheduler's warm-up (0 freezes the weights: a control run)").real(1e-6).at_least(0)
      .to([](R& r) -> auto& { return r.policy.optimizer.lr; })
      .shown_by("tests/unit/actors/runtime/recipe_settings_test.cpp: the_optimizer_scheduler_and_recompute_keys_reach_every_train_engine");
  key(s, "policy.optimizer.weight_decay", "AdamW decoupled weight decay").real(0.01).at_least(0)
      .to([](R& r) -> auto& { return r.policy.optimizer.weight_decay; })
      .fake_ignores().shown_by("tests/unit/actors/runtime/recipe_settings_test.cpp: the_optimizer_scheduler_and_recompute_keys_reach_every_train_engine");
  key(s, "policy.optimizer.beta1", "AdamW first-moment decay").real(0.9).at_least(0).below(1)
      .to([](R& r) -> auto& { return r.policy.optimizer.beta1; })
      .fake_ignores().shown_by("tests/unit/actors/runtime/recipe_settings_test.cpp: the_optimizer_scheduler_and_recompute_keys_reach_every_train_engine");
  key(s, "policy.optimizer.beta2", "AdamW second-moment decay").real(0.999).at_least(0).below(1)
      .to([](R& r) -> auto& { return r.policy.optimizer.beta2; })
      .fake_ignores().shown_by("tests/unit/actors/runtime/recipe_settings_test.cpp: the_optimizer_scheduler_and_recompute_keys_reach_every_train_engine");
  key(s, "policy.optimizer.eps", "AdamW denominator epsilon").real(1e-8).above(0)
      .to([](R& r) -> auto& { return r.policy.optimizer.eps; })
      .fake_ignores().shown_by("tests/unit/actors/runtime/recipe_settings_test.cpp: the_optimizer_scheduler_and_recompute_keys_reach_every_train_engine");
  const std::vector<std::pair<std::string, state_dtype>> dtypes = {{"float32", state_dtype::float32},
                                                                   {"bfloat16", state_dtype::bfloat16}};
  key(s, "policy.optimizer.master_weights_dtype", "Dtype of the master weights the optimizer updates")
      .choice<state_dtype>(dtypes, "float32", [](R& r) -> auto& { return r.policy.optimizer.master_weights_dtype; })
      .fake_ignores().shown_by("tests/unit/actors/runtime/recipe_settings_test.cpp: the_optimizer_scheduler_and_recompute_keys_reach_every_train_engine");
  key(s, "policy.optimizer.first_moment_dtype", "Dtype of AdamW's first moment (exp_avg)")
      .choice<state_dtype>(dtypes, "float32", [](R& r) -> auto& { return r.policy.optimizer.first_moment_dtype; })
      .fake_ignores().shown_by("tests/unit/actors/runtime/recipe_settings_test.cpp: the_optimizer_scheduler_and_recompute_keys_reach_every_train_engine");
  key(s, "policy.optimizer.second_moment_dtype", "Dtype of AdamW's second moment (exp_avg_sq)")
      .choice<state_dtype>(dtypes, "float32", [](R& r) -> auto& { return r.policy.optimizer.second_moment_dtype; })
      .fake_ignores().shown_by("tests/unit/actors/runtime/recipe_settings_test.cpp: the_optimizer_scheduler_and_recompute_keys_reach_every_train_engine");
  key(s, "policy.scheduler.warmup_steps", "Steps of linear learning-rate warm-up, then constant")
      .integer(0).at_least(0).to([](R& r) -> auto& { return r.policy.scheduler.warmup_steps; })
      .shown_by("tests/unit/actors/runtime/recipe_settings_test.cpp: the_optimizer_scheduler_and_recompute_keys_reach_every_train_engine").at_most(4294967295.0);
  key(s, "policy.scheduler.warmup_start_factor", "Learning rate at step 0 as a fraction of lr")
      .real(1e-8).above(0).at_most(1).to([](R& r) -> auto& { return r.policy.scheduler.warmup_start_factor; })
      .shown_by("tests/unit/actors/runtime/recipe_settings_test.cpp: the_optimizer_scheduler_and_recompute_keys_reach_every_train_engine");
}

void declare_data_env(schema& s) {
  key(s, "data.train_dataset", "Training prompts: a JSON-lines file of prompt (or input_ids) and answer records (null: the task's own prompts: parity's over the model's vocabulary, arithmetic's problems)").string("")
      .null_default()
      .to([](R& r) -> auto& { return r.data.train_dataset; })
      .shown_by("tests/unit/actors/runtime/run_task_test.cpp: a_math_task_scores_each_response_by_its_records_answer_with_the_checker_the_recipe_names");
  key(s, "data.validation_dataset", "Validation prompts: a JSON-lines file as data.train_dataset (null: the task's held-out prompts; a run with a training dataset that validates needs one)")
      .string("").null_default().to([](R& r) -> auto& { return r.data.validation_dataset; })
      .shown_by("tests/unit/actors/runtime/run_task_test.cpp: a_math_task_scores_each_response_by_its_records_answer_with_the_checker_the_recipe_names");
  key(s, "data.max_input_seq_length", "Longest prompt in tokens; longer prompts are skipped").integer(2048)
      .at_least(1).to([](R& r) -> auto& { return r.data.max_input_seq_length; })
      .shown_by("tests/unit/orchestration/config/broken_recipes_test.cpp: each_broken_recipe_is_refused_with_its_exact_located_error; tests/data/recipes/broken/rule_sequence_lengths_exceed_total.yaml").at_most(1 << 24);
  key(s, "data.shuffle", "Shuffle training prompts each epoch (seeded by grpo.seed and the epoch)").boolean(true)
      .to([](R& r) -> auto& { return r.data.shuffle; })
      .shown_by("tests/actors/driver/driver_test.cpp: a driver draws its prompts epoch after epoch in a seeded order of each epoch and labels each trajectory with its record and answer; tests/unit/orchestration/data/prompt_order_test.cpp: each_epoch_is_a_permutation_of_its_own_and_no_shuffle_keeps_file_order");
  key(s, "env.name", "Reward environment: parity (the synthetic task of data.train_dataset null: an even last generated token scores 1), arithmetic (the built-in a+b= task: the exact sum scores 1), math (a dataset's answers, checked by env.math.checker) or external (a process of yours scores each trajectory: env.external.command)")
      .choice<environment_kind>({{"parity", environment_kind::parity}, {"arithmetic", environment_kind::arithmetic},
                                 {"math", environment_kind::math}, {"external", environment_kind::external}},
                                "parity", [](R& r) -> auto& { return r.env.name; })
      .shown_by("tests/integration/runtime/gemma4_run_test.cpp: an_external_environment_that_scores_parity_gives_the_parity_runs_metrics_bit_for_bit; tests/integration/runtime/task_run_test.cpp: an_arithmetic_run_warms_up_then_validates_on_held_out_problems_scored_by_their_sums");
  key(s, "env.arithmetic.max_operand", "env.name arithmetic: the problems are a+b= for a and b in [0, max_operand]")
      .integer(default_arithmetic_max_operand).at_least(1).at_most(999).to([](R& r) -> auto& { return r.env.arithmetic.max_operand; })
      .shown_by("tests/integration/runtime/task_run_test.cpp: an_arithmetic_run_warms_up_then_validates_on_held_out_problems_scored_by_their_sums");
  key(s, "env.math.checker", "env.name math: answer_line (DAPO: the last \"Answer:\" line of the response's last 300 characters, normalised) or strict_boxed (the last \\boxed{} of its last 100 characters, as given)")
      .choice<math_checker>({{"answer_line", math_checker::answer_line}, {"strict_boxed", math_checker::strict_boxed}},
                            "answer_line", [](R& r) -> auto& { return r.env.math.checker; })
      .shown_by("tests/unit/actors/runtime/run_task_test.cpp: a_math_task_scores_each_response_by_its_records_answer_with_the_checker_the_recipe_names");
  key(s, "env.external.command", "env.name external: the reward process, run as /bin/sh -c COMMAND in the directory tandem runs in; JSON lines on its stdin and stdout, one trajectory and one {\"reward\": R} per line (tools/external_reward_example.py)")
      .string("").null_default().to([](R& r) -> auto& { return r.env.external.command; })
      .shown_by("tests/integration/runtime/gemma4_run_test.cpp: an_external_environment_that_scores_parity_gives_the_parity_runs_metrics_bit_for_bit");
  key(s, "env.external.timeout_s", "env.name external: seconds the process may take to answer one trajectory before the step fails naming it")
      .integer(default_external_timeout_s).at_least(1).at_most(86400).to([](R& r) -> auto& { return r.env.external.timeout_s; })
      .shown_by("tests/actors/environment/external_environment_test.cpp: a process that hangs past the timeout fails the step naming the trajectory and its prompt");
  key(s, "env.num_workers", "Threads scoring trajectories").integer(4).at_least(1).at_most(256)
      .to([](R& r) -> auto& { return r.env.num_workers; })
      .shown_by("tests/actors/environment/environment_test.cpp: a pool scores every trajectory in job order whatever the split over its workers");
}

void declare_sft(schema& s) {
  key(s, "sft.max_num_steps", "Supervised warm-up steps before the RL phase: next-token cross-entropy on the training prompts' answers (0: none)")
      .integer(0).at_least(0).at_most(1 << 24).to([](R& r) -> auto& { return r.sft.max_num_steps; })
      .shown_by("tests/integration/runtime/task_run_test.cpp: an_arithmetic_run_warms_up_then_validates_on_held_out_problems_scored_by_their_sums");
  key(s, "sft.lr", "The warm-up's AdamW learning rate (policy.optimizer.lr is the RL phase's)").real(default_sft_lr).above(0)
      .to([](R& r) -> auto& { return r.sft.lr; })
      .shown_by("tests/actors/policy_worker/policy_worker_test.cpp: each objective trains at its own learning rate and a rate of 0 leaves the weights as they are");
  key(s, "sft.batch_size", "Examples per warm-up step").integer(default_sft_batch_size).at_least(1).at_most(1 << 20)
      .to([](R& r) -> auto& { return r.sft.batch_size; })
      .shown_by("tests/integration/runtime/task_run_test.cpp: an_arithmetic_run_warms_up_then_validates_on_held_out_problems_scored_by_their_sums");
}

void declare_checkpoint_logger(schema& s) {
  key(s, "checkpointing.enabled", "Write step checkpoints, and resume from the newest in the run directory").boolean(false)
      .to([](R& r) -> auto& { return r.checkpointing.enabled; })
      .shown_by("tests/integration/runtime/checkpoint_resume_test.cpp: a_run_of_4_steps_and_a_run_of_2_steps_resumed_to_4_give_bitwise_identical_metrics_generations_and_final_weights; tests/integration/runtime/checkpoint_resume_test.cpp: a_resume_with_another_recipe_is_refused_listing_the_differing_keys");
  key(s, "checkpointing.checkpoint_dir", "Folder holding step_N/ checkpoints (relative: to the run directory)").string("checkpoints")
      .to([](R& r) -> auto& { return r.checkpointing.checkpoint_dir; })
      .shown_by("tests/integration/runtime/checkpoint_resume_test.cpp: a_run_of_4_steps_and_a_run_of_2_steps_resumed_to_4_give_bitwise_identical_metrics_generations_and_final_weights");
  key(s, "checkpointing.save_period", "Checkpoint every this many steps (and at the last step)")
      .integer(10).at_least(1).to([](R& r) -> auto& { return r.checkpointing.save_period; })
      .shown_by("tests/integration/runtime/checkpoint_resume_test.cpp: a_run_of_4_steps_and_a_run_of_2_steps_resumed_to_4_give_bitwise_identical_metrics_generations_and_final_weights").at_most(4294967295.0);
  key(s, "checkpointing.keep_top_k", "Checkpoints kept: the newest and the best this many by metric_name (or the newest, without one); null: all")
      .integer(3).nullable().at_least(1).to([](R& r) -> auto& { return r.checkpointing.keep_top_k; })
      .shown_by("tests/integration/runtime/checkpoint_resume_test.cpp: a_run_of_4_steps_and_a_run_of_2_steps_resumed_to_4_give_bitwise_identical_metrics_generations_and_final_weights").at_most(1 << 20);
  key(s, "checkpointing.metric_name", "Metric that ranks checkpoints: a metrics.jsonl key (validation/accuracy) or NeMo-RL's val:accuracy (null: newest)")
      .string("").null_default().to([](R& r) -> auto& { return r.checkpointing.metric_name; })
      .shown_by("tests/unit/orchestration/records/checkpoint_retention_test.cpp: the_best_two_by_a_rising_and_falling_accuracy_and_the_newest_are_kept_after_every_save; tests/integration/runtime/checkpoint_resume_test.cpp: retention_by_a_metric_keeps_the_newest_checkpoint_and_the_best_by_validation_accuracy");
  key(s, "checkpointing.higher_is_better", "Direction of metric_name").boolean(true)
      .to([](R& r) -> auto& { return r.checkpointing.higher_is_better; })
      .shown_by("tests/unit/orchestration/records/checkpoint_retention_test.cpp: a_loss_ranks_lower_first_and_ties_go_to_the_newer_step");
  key(s, "checkpointing.save_optimizer", "Include optimizer state (needed to resume exactly)")
      .boolean(true).to([](R& r) -> auto& { return r.checkpointing.save_optimizer; })
      .not_built_unless([](const R& r) { return r.checkpointing.save_optimizer; }, true, "false",
                        "checkpoints without the optimizer state are not built: every checkpoint resumes exactly");
  key(s, "logger.log_dir", "Folder for logs and metrics").string("logs")
      .to([](R& r) -> auto& { return r.logger.log_dir; })
      .shown_by("tests/integration/runtime/rl_run_test.cpp: a_colocated_run_trains_every_step_on_trajectories_of_the_newest_weights_with_identical_policy_ranks");
  key(s, "logger.jsonl_enabled", "Write metrics to log_dir/metrics.jsonl").boolean(true)
      .to([](R& r) -> auto& { return r.logger.jsonl_enabled; })
      .shown_by("tests/integration/runtime/recipe_effects_test.cpp: with_jsonl_disabled_a_run_writes_no_metrics_or_generations");
  key(s, "logger.tensorboard_enabled", "TensorBoard event files").boolean(false)
      .to([](R& r) -> auto& { return r.logger.tensorboard_enabled; })
      .shown_by("tests/integration/runtime/recipe_effects_test.cpp: reward_keys_shape_clip_and_filter_what_a_run_trains_on_and_tensorboard_records_every_step; tests/unit/orchestration/records/run_files_test.cpp: with_tensorboard_the_run_files_hold_one_events_file");
  key(s, "logger.wandb_enabled", "Weights & Biases logging").boolean(false)
      .to([](R& r) -> auto& { return r.logger.wandb_enabled; })
      .not_built_unless([](const R& r) { return r.logger.wandb_enabled; }, false, "true", "Weights & Biases logging is not built yet; metrics go to metrics.jsonl");
  key(s, "logger.num_val_samples_to_print", "Validation samples printed to the log").integer(0)
      .at_least(0).to([](R& r) -> auto& { return r.logger.num_val_samples_to_print; })
      .shown_by("tests/integration/runtime/validation_run_test.cpp: val_at_start_records_a_validation_pass_at_step_0_with_the_initial_weights").at_most(1 << 20);
}

void declare_cluster(schema& s) {
  key(s, "cluster.backend", "Compute backend: cuda (bf16, GPUs) or cpu (float32 reference)")
      .choice<compute_backend>({{"cuda", compute_backend::cuda}, {"cpu", compute_backend::cpu}}, "cuda",
                               [](R& r) -> auto& { return r.cluster.backend; })
      .not_built_when([](const R& r) { return r.cluster.backend == compute_backend::cuda && r.cluster.num_nodes * r.cluster.gpus_per_node > 1; },
                      "cuda", "on CUDA the RL loop runs on one device (cluster.num_nodes 1, cluster.gpus_per_node 1, policy and "
                      "rollout colocated); refits and gradients between devices over NCCL are not built yet")
      .shown_by("tests/gpu/runtime/colocated_cuda_run_test.cpp: a_colocated_run_on_one_gpu_generates_every_step_with_the_weights_the_trainer_just_produced; tests/unit/actors/runtime/engine_factory_test.cpp: gemma4_on_cuda_without_the_members_device_is_refused_naming_the_device_and_what_the_process_sees");
  key(s, "cluster.num_nodes", "Nodes in the job").integer(1).at_least(1)
      .to([](R& r) -> auto& { return r.cluster.num_nodes; })
      .shown_by("tests/unit/orchestration/topology/placement_test.cpp: dedicated_generation_on_several_nodes_puts_whole_training_nodes_first_then_rollout_nodes").at_most(65536);
  key(s, "cluster.gpus_per_node", "Devices per node (cpu backend: member processes per node)").integer(8)
      .at_least(1).at_most(64).to([](R& r) -> auto& { return r.cluster.gpus_per_node; })
      .shown_by("tests/unit/orchestration/topology/placement_test.cpp: the_data_parallel_size_counts_the_training_devices");
  key(s, "cluster.device_memory_gib", "Memory of one device, for the memory plan (H200: 140)").real(140.0)
      .above(0).to([](R& r) -> auto& { return r.cluster.device_memory_gib; })
      .shown_by("tests/unit/orchestration/topology/memory_plan_test.cpp: phases_larger_than_the_device_and_a_kv_cache_without_room_are_warned_about; tests/unit/actors/runtime/engine_factory_test.cpp: the_kv_cache_holds_max_num_sequences_full_length_sequences_within_what_gpu_memory_utilization_leaves").at_most(1 << 20);
  key(s, "cluster.controller_host", "Address the controller's control socket binds and members dial")
      .string("127.0.0.1").to([](R& r) -> auto& { return r.cluster.controller_host; })
      .shown_by("tests/unit/orchestration/topology/placement_test.cpp: the_control_endpoint_is_tcp_to_the_controller_host_and_port");
  key(s, "cluster.controller_port", "TCP port of the controller's control socket").integer(29650)
      .at_least(1024).at_most(65535).to([](R& r) -> auto& { return r.cluster.controller_port; })
      .shown_by("tests/unit/orchestration/topology/placement_test.cpp: the_control_endpoint_is_tcp_to_the_controller_host_and_port");
  key(s, "cluster.secure",
      "CurveZMQ on every socket of the run: peers prove the run's keys, traffic is encrypted; false only on loopback")
      .boolean(true).to([](R& r) -> auto& { return r.cluster.secure; })
      .shown_by("tests/integration/runtime/run_security_test.cpp: an_insecure_run_is_refused_unless_every_address_is_loopback");
}

void declare_runtime(schema& s) {
  key(s, "runtime.engine", "Engines behind the actors: gemma4 (the model of policy.model_name: float32 on cluster.backend cpu, bfloat16 on cuda) or fake (deterministic stand-ins that exercise the runtime; they ignore the model's own settings)")
      .choice<engine_kind>({{"gemma4", engine_kind::gemma4}, {"fake", engine_kind::fake}}, "gemma4",
                           [](R& r) -> auto& { return r.runtime.engine; })
      .not_built_when([](const R& r) { return r.runtime.engine == engine_kind::fake && r.cluster.backend == compute_backend::cuda; },
                      "fake", "the fake engines run on cluster.backend: cpu only")
      .shown_by("tests/unit/actors/runtime/engine_factory_test.cpp: runtime_engine_gemma4_builds_the_cpu_engines_over_the_checkpoint_that_policy_model_name_names; tests/integration/runtime/gemma4_run_test.cpp: a_colocated_gemma4_run_trains_every_step_with_identical_policy_ranks_and_generates_with_the_newest_weights; tests/integration/runtime/gemma4_run_test.cpp: colocated_and_dedicated_gemma4_runs_of_one_recipe_and_seed_give_bitwise_identical_generations_and_metrics");
  key(s, "runtime.fake_weight_mb", "Fake engines: size of the fake model's weights in MiB").integer(16).at_least(1)
      .at_most(65536).to([](R& r) -> auto& { return r.runtime.fake_weight_mb; }).gemma4_ignores()
      .shown_by("tests/unit/actors/runtime/engine_factory_test.cpp: the_fake_model_follows_fake_weight_mb_the_seed_and_the_sequence_length");
  key(s, "runtime.heartbeat_interval_ms", "Heartbeats between the controller and every member, both ways")
      .integer(1000).at_least(10).at_most(3'600'000).to([](R& r) -> auto& { return r.runtime.heartbeat_interval_ms; })
      .shown_by("tests/actors/supervisor/supervisor_test.cpp: a member that stops answering is reported by name after the heartbeat timeout");
  key(s, "runtime.heartbeat_timeout_ms", "A member silent this long is declared dead or hung and the run fails naming it")
      .integer(10000).at_least(100).at_most(86'400'000).to([](R& r) -> auto& { return r.runtime.heartbeat_timeout_ms; })
      .shown_by("tests/integration/runtime/controller_faults_test.cpp: a_stopped_controller_makes_every_member_exit_after_the_heartbeat_timeout");
  key(s, "runtime.request_timeout_s", "Deadline of one generate, logprob, train or refit request")
      .integer(1800).at_least(1).at_most(604'800).to([](R& r) -> auto& { return r.runtime.request_timeout_s; })
      .shown_by("tests/integration/runtime/recipe_effects_test.cpp: a_request_past_request_timeout_s_fails_the_run_naming_the_request");
}

schema build() {
  schema s;
  declare_grpo(s);
  declare_loss(s);
  declare_policy(s);
  declare_data_env(s);
  declare_sft(s);
  declare_checkpoint_logger(s);
  declare_cluster(s);
  declare_runtime(s);
  return s;
}

}  // namespace

const char* describe(value_kind kind) {
  switch (kind) {
    case value_kind::boolean: return "true or false";
    case value_kind::integer: return "an integer";
    case value_kind::real: return "a number";
    case value_kind::string: return "a string";
    case value_kind::choice: return "one of the listed choices";
    case value_kind::integer_list: return "a list of integers";
    case value_kind::real_list: return "a list of numbers";
    case value_kind::string_list: return "a list of strings";
  }
  return "?";
}

const schema& schema::recipes() {
  static const schema instance = build();
  return instance;
}

const key_spec* schema::find(std::string_view path) const {
  for (const auto& k : keys_)
    if (k.path == path) return &k;
  return nullptr;
}

bool schema::is_section(std::string_view path) const {
  if (path.empty()) return true;
  for (const auto& k : keys_)
    if (k.path.size() > path.size() && k.path.starts_with(path) && k.path[path.size()] == '.') return true;
  return false;
}

std::vector<std::string> schema::children(std::string_view section) const {
  std::vector<std::string> out;
  std::set<std::string> seen;
  const std::size_t skip = section.empty() ? 0 : section.size() + 1;
  for (const auto& k : keys_) {
    if (!section.empty() && !(k.path.size() > skip && k.path.starts_with(section) && k.path[section.size()] == '.'))
      continue;
    std::string rest = k.path.substr(skip);
    std::string child = rest.substr(0, rest.find('.'));
    if (seen.insert(child).second) out.push_back(child);
  }
  return out;
}

}  // namespace tandem::config
