// Settings derived from the recipe (recipe_settings.hpp).
#include "actors/runtime/recipe_settings.hpp"

#include <limits>

namespace tandem {

gpu::ops::pg_loss_settings loss_settings(const config::recipe_config& recipe) {
  const auto& l = recipe.loss_fn;
  gpu::ops::pg_loss_settings s;
  s.ratio_clip_min = l.ratio_clip_min;
  s.ratio_clip_max = l.ratio_clip_max;
  s.ratio_clip_c = l.ratio_clip_c;
  if (!l.use_importance_sampling_correction) {
    s.importance = gpu::ops::importance_correction::off;
  } else if (!l.truncated_importance_sampling_ratio) {
    s.importance = gpu::ops::importance_correction::plain;
  } else {
    switch (l.truncated_importance_sampling_type) {
      case config::importance_sampling_type::tis: s.importance = gpu::ops::importance_correction::tis; break;
      case config::importance_sampling_type::icepop: s.importance = gpu::ops::importance_correction::icepop; break;
      case config::importance_sampling_type::seq_mask_tis: s.importance = gpu::ops::importance_correction::seq_mask_tis; break;
    }
    s.is_ratio_max = *l.truncated_importance_sampling_ratio;
  }
  s.is_ratio_min = l.truncated_importance_sampling_ratio_min;
  s.kl_beta = l.reference_policy_kl_penalty;
  s.kl_input_clamp = l.kl_input_clamp_value;
  s.kl_output_clamp = l.kl_output_clamp_value;
  s.use_on_policy_kl_approximation = l.use_on_policy_kl_approximation;
  s.token_level_loss = l.token_level_loss;
  s.force_on_policy_ratio = l.force_on_policy_ratio;
  return s;
}

gpu::ops::sampling_params sampling_settings(const config::recipe_config& recipe) {
  const auto& g = recipe.policy.generation;
  return {g.temperature, static_cast<std::int32_t>(g.top_k.value_or(0)), g.top_p};
}

namespace {

gpu::dtype dtype_of(config::state_dtype t) {
  return t == config::state_dtype::bfloat16 ? gpu::dtype::bfloat16 : gpu::dtype::float32;
}

}  // namespace

gpu::train_engine_options train_engine_settings(const config::recipe_config& recipe) {
  const auto& p = recipe.policy;
  gpu::train_engine_options o;
  o.adamw.lr = p.optimizer.lr;
  o.adamw.beta1 = p.optimizer.beta1;
  o.adamw.beta2 = p.optimizer.beta2;
  o.adamw.eps = p.optimizer.eps;
  o.adamw.weight_decay = p.optimizer.weight_decay;
  o.warmup_steps = p.scheduler.warmup_steps;
  o.warmup_start_factor = p.scheduler.warmup_start_factor;
  o.max_grad_norm = p.max_grad_norm.value_or(0.0);
  switch (p.recompute) {
    case config::recompute_granularity::none: o.recompute = gpu::recompute_mode::none; break;
    case config::recompute_granularity::selective: o.recompute = gpu::recompute_mode::selective; break;
    case config::recompute_granularity::full: o.recompute = gpu::recompute_mode::full; break;
  }
  o.logprob_chunk_rows = p.logprob_chunk_size;
  o.master_dtype = dtype_of(p.optimizer.master_weights_dtype);
  o.first_moment_dtype = dtype_of(p.optimizer.first_moment_dtype);
  o.second_moment_dtype = dtype_of(p.optimizer.second_moment_dtype);
  return o;
}

std::int64_t micro_batch_token_budget(const config::recipe_config& recipe) {
  return recipe.policy.train_micro_batch_size * recipe.policy.max_total_sequence_length;
}

std::int64_t refit_bucket_bytes(const config::recipe_config& recipe) { return recipe.policy.refit.bucket_mb << 20; }

}  // namespace tandem
