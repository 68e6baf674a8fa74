// The step settings of a recipe (step_settings.h).
#include "orchestration/rl/step_settings.h"

#include <string>

#include "orchestration/config/checked_int.h"

namespace tandem::rl {

namespace {

std::optional<rl_error> at_least_one(const char* key, std::int64_t v) {
  if (v >= 1) return std::nullopt;
  return rl_error{rl_errc::invalid_setting, std::string(key) + " is " + std::to_string(v) + ", below 1"};
}

rl_error overflow(const std::string& what) { return {rl_errc::count_overflow, what + " overflows int64"}; }

}  // namespace

rl_result<step_settings> make_step_settings(const config::recipe_config& r) {
  const auto& g = r.grpo;
  step_settings s;
  s.num_prompts_per_step = g.num_prompts_per_step;
  s.num_generations_per_prompt = g.num_generations_per_prompt;
  s.use_dynamic_sampling = g.use_dynamic_sampling;
  s.train_global_batch_size = r.policy.train_global_batch_size;
  if (auto e = at_least_one("grpo.num_prompts_per_step", s.num_prompts_per_step)) return *e;
  if (auto e = at_least_one("grpo.num_generations_per_prompt", s.num_generations_per_prompt)) return *e;
  if (auto e = at_least_one("policy.train_global_batch_size", s.train_global_batch_size)) return *e;
  if (s.use_dynamic_sampling) {
    if (auto e = at_least_one("grpo.batch_multiplier", g.batch_multiplier)) return *e;
    if (auto e = at_least_one("grpo.dynamic_sampling_max_gen_batches", g.dynamic_sampling_max_gen_batches)) return *e;
  }

  const auto per_step = config::checked_mul(s.num_prompts_per_step, s.num_generations_per_prompt);
  if (!per_step) return overflow("grpo.num_prompts_per_step x grpo.num_generations_per_prompt");
  s.samples_per_step = *per_step;
  const auto per_round = config::checked_mul(s.num_prompts_per_step, s.use_dynamic_sampling ? g.batch_multiplier : 1);
  if (!per_round) return overflow("grpo.num_prompts_per_step x grpo.batch_multiplier");
  s.prompts_per_round = *per_round;
  const auto samples_round = config::checked_mul(s.prompts_per_round, s.num_generations_per_prompt);
  if (!samples_round) return overflow("grpo.num_prompts_per_step x grpo.batch_multiplier x grpo.num_generations_per_prompt");
  s.samples_per_round = *samples_round;
  if (s.samples_per_step % s.train_global_batch_size != 0)
    return rl_error{rl_errc::does_not_divide,
                    "the step's " + std::to_string(s.samples_per_step) +
                        " samples (grpo.num_prompts_per_step x grpo.num_generations_per_prompt) do not split into "
                        "whole global batches of policy.train_global_batch_size = " +
                        std::to_string(s.train_global_batch_size) + " samples"};
  s.optimizer_steps_per_step = s.samples_per_step / s.train_global_batch_size;

  s.scaling = {g.reward_scaling.enabled, g.reward_scaling.source_min, g.reward_scaling.source_max,
               g.reward_scaling.target_min, g.reward_scaling.target_max};
  s.shaping = {g.reward_shaping.enabled, g.reward_shaping.overlong_buffer_length,
               g.reward_shaping.overlong_buffer_penalty, g.reward_shaping.max_response_length};
  s.baseline = g.use_leave_one_out_baseline ? baseline_kind::leave_one_out : baseline_kind::mean;
  s.advantages = {g.normalize_rewards, g.advantage_clip_low, g.advantage_clip_high};
  s.dynamic_sampling = {s.samples_per_step, g.dynamic_sampling_max_gen_batches, s.baseline};
  s.overlong_filtering = g.overlong_filtering;
  if (auto e = check_settings(s.scaling)) return *e;
  if (auto e = check_settings(s.shaping)) return *e;
  if (auto e = check_settings(s.advantages)) return *e;
  return s;
}

}  // namespace tandem::rl
