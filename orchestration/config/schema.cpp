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

void declare_grpo(schema& s) {
  key(s, "grpo.num_prompts_per_step", "Prompts drawn from the dataset per step").integer(32).at_least(1)
      .at_most(1 << 20).to([](R& r) -> auto& { return r.grpo.num_prompts_per_step; });
  key(s, "grpo.num_generations_per_prompt", "Samples per prompt (the GRPO group size)").integer(16)
      .at_least(2).at_most(1 << 16).to([](R& r) -> auto& { return r.grpo.num_generations_per_prompt; });
  key(s, "grpo.max_num_steps", "Stop after this many steps").integer(1000000).at_least(1)
      .to([](R& r) -> auto& { return r.grpo.max_num_steps; });
  key(s, "grpo.max_num_epochs", "Stop after this many passes over the training data").integer(1)
      .at_least(1).to([](R& r) -> auto& { return r.grpo.max_num_epochs; });
  key(s, "grpo.normalize_rewards", "Divide advantages by the group's reward std").boolean(true)
      .to([](R& r) -> auto& { return r.grpo.normalize_rewards; });
  key(s, "grpo.use_leave_one_out_baseline", "Baseline each sample on the other samples of its group (RLOO)")
      .boolean(false).to([](R& r) -> auto& { return r.grpo.use_leave_one_out_baseline; });
  key(s, "grpo.use_dynamic_sampling", "DAPO: keep only groups whose rewards differ, generate until the batch is full")
      .boolean(false).to([](R& r) -> auto& { return r.grpo.use_dynamic_sampling; });
  key(s, "grpo.batch_multiplier", "Prompts per generation round = num_prompts_per_step x this (dynamic sampling)")
      .integer(1).at_least(1).to([](R& r) -> auto& { return r.grpo.batch_multiplier; });
  key(s, "grpo.dynamic_sampling_max_gen_batches", "Fail the step after this many generation rounds without a full batch")
      .integer(10).at_least(1).to([](R& r) -> auto& { return r.grpo.dynamic_sampling_max_gen_batches; });
  key(s, "grpo.reward_scaling.enabled", "Clamp rewards to [source_min, source_max] and map them onto [target_min, target_max]")
      .boolean(false).to([](R& r) -> auto& { return r.grpo.reward_scaling.enabled; });
  key(s, "grpo.reward_scaling.source_min", "Lower end of the raw reward range").real(0.0)
      .to([](R& r) -> auto& { return r.grpo.reward_scaling.source_min; });
  key(s, "grpo.reward_scaling.source_max", "Upper end of the raw reward range").real(1.0)
      .to([](R& r) -> auto& { return r.grpo.reward_scaling.source_max; });
  key(s, "grpo.reward_scaling.target_min", "Scaled reward of source_min").real(0.0)
      .to([](R& r) -> auto& { return r.grpo.reward_scaling.target_min; });
  key(s, "grpo.reward_scaling.target_max", "Scaled reward of source_max").real(1.0)
      .to([](R& r) -> auto& { return r.grpo.reward_scaling.target_max; });
  key(s, "grpo.reward_shaping.enabled", "DAPO overlong shaping: penalise responses that run into the overlong buffer")
      .boolean(false).to([](R& r) -> auto& { return r.grpo.reward_shaping.enabled; });
  key(s, "grpo.reward_shaping.overlong_buffer_length", "Tokens before max_response_length over which the penalty ramps up")
      .integer(128).at_least(1).to([](R& r) -> auto& { return r.grpo.reward_shaping.overlong_buffer_length; });
  key(s, "grpo.reward_shaping.overlong_buffer_penalty", "Penalty at max_response_length").real(1.0)
      .at_least(0).to([](R& r) -> auto& { return r.grpo.reward_shaping.overlong_buffer_penalty; });
  key(s, "grpo.reward_shaping.max_response_length", "Response length at which the full penalty applies")
      .integer(2048).at_least(1).to([](R& r) -> auto& { return r.grpo.reward_shaping.max_response_length; });
  key(s, "grpo.overlong_filtering", "Exclude truncated samples from the loss").boolean(false)
      .to([](R& r) -> auto& { return r.grpo.overlong_filtering; });
  key(s, "grpo.advantage_clip_low", "Clamp advantages from below (null: no clamp)").real(0).null_default()
      .to([](R& r) -> auto& { return r.grpo.advantage_clip_low; });
  key(s, "grpo.advantage_clip_high", "Clamp advantages from above (null: no clamp)").real(0).null_default()
      .to([](R& r) -> auto& { return r.grpo.advantage_clip_high; });
  key(s, "grpo.max_trajectory_age_steps", "0: synchronous GRPO; 1: generation of step n+1 overlaps training of step n")
      .integer(0).at_least(0).at_most(1).to([](R& r) -> auto& { return r.grpo.max_trajectory_age_steps; });
  key(s, "grpo.val_period", "Validate every this many steps (0: never)").integer(0).at_least(0)
      .to([](R& r) -> auto& { return r.grpo.val_period; });
  key(s, "grpo.val_at_start", "Validate before the first step").boolean(false)
      .to([](R& r) -> auto& { return r.grpo.val_at_start; });
  key(s, "grpo.val_at_end", "Validate after the last step").boolean(false)
      .to([](R& r) -> auto& { return r.grpo.val_at_end; });
  key(s, "grpo.max_val_samples", "Validation prompts per validation").integer(256).at_least(1)
      .to([](R& r) -> auto& { return r.grpo.max_val_samples; });
  key(s, "grpo.val_batch_size", "Validation prompts generated at once").integer(256).at_least(1)
      .to([](R& r) -> auto& { return r.grpo.val_batch_size; });
  key(s, "grpo.seed", "Seed of every random stream (data order, sampling)").integer(42).at_least(0)
      .to([](R& r) -> auto& { return r.grpo.seed; });
}

void declare_loss(schema& s) {
  key(s, "loss_fn.reference_policy_kl_penalty", "Weight of the k3 KL term against the initial policy (0: off)")
      .real(0.0).at_least(0).to([](R& r) -> auto& { return r.loss_fn.reference_policy_kl_penalty; });
  key(s, "loss_fn.kl_input_clamp_value", "Clamp of the log-ratio fed to the KL estimate").real(20.0)
      .above(0).to([](R& r) -> auto& { return r.loss_fn.kl_input_clamp_value; });
  key(s, "loss_fn.kl_output_clamp_value", "Clamp of the per-token KL estimate").real(10.0).above(0)
      .to([](R& r) -> auto& { return r.loss_fn.kl_output_clamp_value; });
  key(s, "loss_fn.ratio_clip_min", "PPO ratio lower clip: 1 - ratio_clip_min").real(0.2).at_least(0)
      .below(1).to([](R& r) -> auto& { return r.loss_fn.ratio_clip_min; });
  key(s, "loss_fn.ratio_clip_max", "PPO ratio upper clip: 1 + ratio_clip_max (DAPO clip-higher: 0.28)")
      .real(0.2).at_least(0).to([](R& r) -> auto& { return r.loss_fn.ratio_clip_max; });
  key(s, "loss_fn.ratio_clip_c", "Dual-clip bound c > 1 for negative advantages (null: off)").real(0)
      .null_default().above(1).to([](R& r) -> auto& { return r.loss_fn.ratio_clip_c; });
  key(s, "loss_fn.use_importance_sampling_correction", "Weight tokens by the trainer/generator probability ratio")
      .boolean(false).to([](R& r) -> auto& { return r.loss_fn.use_importance_sampling_correction; });
  key(s, "loss_fn.truncated_importance_sampling_type", "How the importance weight is bounded")
      .choice<importance_sampling_type>({{"tis", importance_sampling_type::tis},
                                         {"icepop", importance_sampling_type::icepop},
                                         {"seq-mask-tis", importance_sampling_type::seq_mask_tis}},
                                        "tis", [](R& r) -> auto& { return r.loss_fn.truncated_importance_sampling_type; });
  key(s, "loss_fn.truncated_importance_sampling_ratio", "Upper bound of the importance weight (null: unbounded)")
      .real(0).null_default().above(0)
      .to([](R& r) -> auto& { return r.loss_fn.truncated_importance_sampling_ratio; });
  key(s, "loss_fn.truncated_importance_sampling_ratio_min", "Lower bound of the weight (icepop, seq-mask-tis)")
      .real(0.5).at_least(0).to([](R& r) -> auto& { return r.loss_fn.truncated_importance_sampling_ratio_min; });
  key(s, "loss_fn.token_level_loss", "Average over all tokens of the global batch (DAPO) instead of per sequence")
      .boolean(true).to([](R& r) -> auto& { return r.loss_fn.token_level_loss; });
  key(s, "loss_fn.use_on_policy_kl_approximation", "Weight the KL term by the trainer/generator ratio")
      .boolean(false).to([](R& r) -> auto& { return r.loss_fn.use_on_policy_kl_approximation; });
  key(s, "loss_fn.force_on_policy_ratio", "Use ratio 1 (skip the previous-policy logprob pass)")
      .boolean(false).to([](R& r) -> auto& { return r.loss_fn.force_on_policy_ratio; });
}

void declare_policy(schema& s) {
  key(s, "policy.model_name", "Local Hugging Face checkpoint directory, or a preset in configs/models/")
      .string("").required().to([](R& r) -> auto& { return r.policy.model_name; });
  key(s, "policy.train_global_batch_size", "Samples per optimizer step, over all data-parallel ranks")
      .integer(512).at_least(1).to([](R& r) -> auto& { return r.policy.train_global_batch_size; });
  key(s, "policy.train_micro_batch_size", "Token budget of one forward/backward pass on one rank, in samples of max_total_sequence_length tokens: samples are packed into a pass while they fit").integer(1)
      .at_least(1).to([](R& r) -> auto& { return r.policy.train_micro_batch_size; });
  key(s, "policy.logprob_batch_size", "Samples per logprob pass on one rank").integer(1).at_least(1)
      .to([](R& r) -> auto& { return r.policy.logprob_batch_size; });
  key(s, "policy.max_total_sequence_length", "Longest prompt + response in tokens").integer(4096)
      .at_least(2).to([](R& r) -> auto& { return r.policy.max_total_sequence_length; });
  key(s, "policy.logprob_chunk_size", "Tokens whose vocabulary logits exist at once when scoring")
      .integer(1024).at_least(1).to([](R& r) -> auto& { return r.policy.logprob_chunk_size; });
  key(s, "policy.max_grad_norm", "Clip the global gradient norm to this (null: no clipping)").real(1.0)
      .nullable().above(0).to([](R& r) -> auto& { return r.policy.max_grad_norm; });
  key(s, "policy.offload_optimizer_for_logprob", "Move optimizer state to host memory during the logprob pass")
      .boolean(false).to([](R& r) -> auto& { return r.policy.offload_optimizer_for_logprob; });
  key(s, "policy.offload_optimizer_for_generation", "Colocated: move optimizer state to host memory while generating")
      .boolean(true).to([](R& r) -> auto& { return r.policy.offload_optimizer_for_generation; });
  key(s, "policy.recompute_granularity", "Activation recompute in backward: none, selective (attention and MLP insides), full (whole layers)")
      .choice<recompute_granularity>({{"none", recompute_granularity::none},
                                      {"selective", recompute_granularity::selective},
                                      {"full", recompute_granularity::full}},
                                     "none", [](R& r) -> auto& { return r.policy.recompute; });
  key(s, "policy.tensor_parallel_size", "Tensor-parallel size of training").integer(1).at_least(1)
      .only(std::int64_t{1}, "training shards parameters and optimizer state over data-parallel ranks; tensor parallelism is not implemented yet")
      .to([](R& r) -> auto& { return r.policy.tensor_parallel_size; });
  key(s, "policy.context_parallel_size", "Context-parallel size of training").integer(1).at_least(1)
      .only(std::int64_t{1}, "context parallelism is not implemented yet")
      .to([](R& r) -> auto& { return r.policy.context_parallel_size; });
  key(s, "policy.expert_parallel_size", "Expert-parallel size of training (MoE)").integer(1).at_least(1)
      .only(std::int64_t{1}, "expert parallelism is not implemented yet")
      .to([](R& r) -> auto& { return r.policy.expert_parallel_size; });

  key(s, "policy.refit.bucket_mb", "Refit bucket size in MiB: new weights move to the generators in buckets of this size")
      .integer(512).at_least(1).at_most(65536).to([](R& r) -> auto& { return r.policy.refit.bucket_mb; });
  key(s, "policy.refit.checksums", "Checksum every refit bucket and verify it before staging (debug integrity)")
      .boolean(false).to([](R& r) -> auto& { return r.policy.refit.checksums; });

  key(s, "policy.generation.max_new_tokens", "Longest response in tokens").integer(2048).at_least(1)
      .to([](R& r) -> auto& { return r.policy.generation.max_new_tokens; });
  key(s, "policy.generation.temperature", "Sampling temperature (the trainer scores at the same one)")
      .real(1.0).above(0).to([](R& r) -> auto& { return r.policy.generation.temperature; });
  key(s, "policy.generation.top_p", "Nucleus sampling mass (1.0: off)").real(1.0).above(0).at_most(1)
      .to([](R& r) -> auto& { return r.policy.generation.top_p; });
  key(s, "policy.generation.top_k", "Sample among the k most likely tokens (null: off)").integer(0)
      .null_default().at_least(1).to([](R& r) -> auto& { return r.policy.generation.top_k; });
  key(s, "policy.generation.stop_token_ids", "Token ids that end a response (null: the model's eos ids)")
      .integer_list().null_default().at_least(0)
      .to([](R& r) -> auto& { return r.policy.generation.stop_token_ids; });
  key(s, "policy.generation.colocated.enabled", "Generate on the training devices (true) or on dedicated ones (false)")
      .boolean(true).to([](R& r) -> auto& { return r.policy.generation.colocated; });
  key(s, "policy.generation.colocated.resources.gpus_per_node", "Non-colocated: generation devices per node (one node: taken from the training node)")
      .integer(0).null_default().at_least(1)
      .to([](R& r) -> auto& { return r.policy.generation.resources.gpus_per_node; });
  key(s, "policy.generation.colocated.resources.num_nodes", "Non-colocated: dedicated generation nodes (several nodes)")
      .integer(0).null_default().at_least(1)
      .to([](R& r) -> auto& { return r.policy.generation.resources.num_nodes; });
  key(s, "policy.generation.gpu_memory_utilization", "Fraction of device memory generation may use (weights, KV cache, resident training state)")
      .real(0.9).above(0).at_most(1).to([](R& r) -> auto& { return r.policy.generation.gpu_memory_utilization; });
  key(s, "policy.generation.max_num_sequences", "Sequences one generator decodes at once").integer(256)
      .at_least(1).to([](R& r) -> auto& { return r.policy.generation.max_num_sequences; });
  key(s, "policy.generation.tensor_parallel_size", "Devices one generator spans").integer(1).at_least(1)
      .only(std::int64_t{1}, "each generator holds the whole model on one device; tensor-parallel generation is not implemented yet")
      .to([](R& r) -> auto& { return r.policy.generation.tensor_parallel_size; });

  key(s, "policy.optimizer.lr", "AdamW learning rate after warm-up").real(1e-6).above(0)
      .to([](R& r) -> auto& { return r.policy.optimizer.lr; });
  key(s, "policy.optimizer.weight_decay", "AdamW decoupled weight decay").real(0.01).at_least(0)
      .to([](R& r) -> auto& { return r.policy.optimizer.weight_decay; });
  key(s, "policy.optimizer.beta1", "AdamW first-moment decay").real(0.9).at_least(0).below(1)
      .to([](R& r) -> auto& { return r.policy.optimizer.beta1; });
  key(s, "policy.optimizer.beta2", "AdamW second-moment decay").real(0.999).at_least(0).below(1)
      .to([](R& r) -> auto& { return r.policy.optimizer.beta2; });
  key(s, "policy.optimizer.eps", "AdamW denominator epsilon").real(1e-8).above(0)
      .to([](R& r) -> auto& { return r.policy.optimizer.eps; });
  const std::vector<std::pair<std::string, state_dtype>> dtypes = {{"float32", state_dtype::float32},
                                                                   {"bfloat16", state_dtype::bfloat16}};
  key(s, "policy.optimizer.master_weights_dtype", "Dtype of the master weights the optimizer updates")
      .choice<state_dtype>(dtypes, "float32", [](R& r) -> auto& { return r.policy.optimizer.master_weights_dtype; });
  key(s, "policy.optimizer.first_moment_dtype", "Dtype of AdamW's first moment (exp_avg)")
      .choice<state_dtype>(dtypes, "float32", [](R& r) -> auto& { return r.policy.optimizer.first_moment_dtype; });
  key(s, "policy.optimizer.second_moment_dtype", "Dtype of AdamW's second moment (exp_avg_sq)")
      .choice<state_dtype>(dtypes, "float32", [](R& r) -> auto& { return r.policy.optimizer.second_moment_dtype; });
  key(s, "policy.scheduler.warmup_steps", "Steps of linear learning-rate warm-up, then constant")
      .integer(0).at_least(0).to([](R& r) -> auto& { return r.policy.scheduler.warmup_steps; });
  key(s, "policy.scheduler.warmup_start_factor", "Learning rate at step 0 as a fraction of lr")
      .real(1e-8).above(0).at_most(1).to([](R& r) -> auto& { return r.policy.scheduler.warmup_start_factor; });
}

void declare_data_env(schema& s) {
  key(s, "data.train_dataset", "Training prompts: a JSONL file, or builtin:arithmetic").string("builtin:arithmetic")
      .to([](R& r) -> auto& { return r.data.train_dataset; });
  key(s, "data.validation_dataset", "Validation prompts: a JSONL file, or builtin:arithmetic (null: none)")
      .string("").null_default().to([](R& r) -> auto& { return r.data.validation_dataset; });
  key(s, "data.max_input_seq_length", "Longest prompt in tokens; longer prompts are skipped").integer(2048)
      .at_least(1).to([](R& r) -> auto& { return r.data.max_input_seq_length; });
  key(s, "data.shuffle", "Shuffle training prompts each epoch (seeded by grpo.seed)").boolean(true)
      .to([](R& r) -> auto& { return r.data.shuffle; });
  key(s, "env.name", "Reward environment: arithmetic (built-in demo task) or math (answer checker)")
      .choice<environment_kind>({{"arithmetic", environment_kind::arithmetic}, {"math", environment_kind::math}},
                                "arithmetic", [](R& r) -> auto& { return r.env.name; });
  key(s, "env.num_workers", "Threads scoring trajectories").integer(4).at_least(1).at_most(256)
      .to([](R& r) -> auto& { return r.env.num_workers; });
}

void declare_checkpoint_logger(schema& s) {
  key(s, "checkpointing.enabled", "Write checkpoints").boolean(true)
      .to([](R& r) -> auto& { return r.checkpointing.enabled; });
  key(s, "checkpointing.checkpoint_dir", "Folder holding step_N/ checkpoints").string("results/checkpoints")
      .to([](R& r) -> auto& { return r.checkpointing.checkpoint_dir; });
  key(s, "checkpointing.save_period", "Checkpoint every this many steps (and at the last step)")
      .integer(10).at_least(1).to([](R& r) -> auto& { return r.checkpointing.save_period; });
  key(s, "checkpointing.keep_top_k", "Checkpoints kept, best by metric_name or newest (null: all)")
      .integer(3).nullable().at_least(1).to([](R& r) -> auto& { return r.checkpointing.keep_top_k; });
  key(s, "checkpointing.metric_name", "Metric that ranks checkpoints, e.g. val:accuracy (null: newest)")
      .string("").null_default().to([](R& r) -> auto& { return r.checkpointing.metric_name; });
  key(s, "checkpointing.higher_is_better", "Direction of metric_name").boolean(true)
      .to([](R& r) -> auto& { return r.checkpointing.higher_is_better; });
  key(s, "checkpointing.save_optimizer", "Include optimizer state (needed to resume exactly)")
      .boolean(true).to([](R& r) -> auto& { return r.checkpointing.save_optimizer; });
  key(s, "logger.log_dir", "Folder for logs and metrics").string("logs")
      .to([](R& r) -> auto& { return r.logger.log_dir; });
  key(s, "logger.jsonl_enabled", "Write metrics to log_dir/metrics.jsonl").boolean(true)
      .to([](R& r) -> auto& { return r.logger.jsonl_enabled; });
  key(s, "logger.tensorboard_enabled", "TensorBoard event files").boolean(false)
      .only(false, "TensorBoard output is not implemented yet; metrics go to metrics.jsonl")
      .to([](R& r) -> auto& { return r.logger.tensorboard_enabled; });
  key(s, "logger.wandb_enabled", "Weights & Biases logging").boolean(false)
      .only(false, "Weights & Biases logging is not implemented; metrics go to metrics.jsonl")
      .to([](R& r) -> auto& { return r.logger.wandb_enabled; });
  key(s, "logger.num_val_samples_to_print", "Validation samples printed to the log").integer(0)
      .at_least(0).to([](R& r) -> auto& { return r.logger.num_val_samples_to_print; });
}

void declare_cluster(schema& s) {
  key(s, "cluster.backend", "Compute backend: cuda (bf16, GPUs) or cpu (float32 reference)")
      .choice<compute_backend>({{"cuda", compute_backend::cuda}, {"cpu", compute_backend::cpu}}, "cuda",
                               [](R& r) -> auto& { return r.cluster.backend; });
  key(s, "cluster.num_nodes", "Nodes in the job").integer(1).at_least(1)
      .to([](R& r) -> auto& { return r.cluster.num_nodes; });
  key(s, "cluster.gpus_per_node", "Devices per node (cpu backend: worker processes per node)").integer(8)
      .at_least(1).at_most(64).to([](R& r) -> auto& { return r.cluster.gpus_per_node; });
  key(s, "cluster.device_memory_gib", "Memory of one device, for the memory plan (H200: 140)").real(140.0)
      .above(0).to([](R& r) -> auto& { return r.cluster.device_memory_gib; });
  key(s, "cluster.controller_host", "Address the controller's control socket binds and workers dial")
      .string("127.0.0.1").to([](R& r) -> auto& { return r.cluster.controller_host; });
  key(s, "cluster.controller_port", "TCP port of the controller's control socket").integer(29650)
      .at_least(1024).at_most(65535).to([](R& r) -> auto& { return r.cluster.controller_port; });
  key(s, "cluster.secure",
      "CurveZMQ on every socket of the run: peers prove the run's keys, traffic is encrypted; false only on loopback")
      .boolean(true).to([](R& r) -> auto& { return r.cluster.secure; });
}

void declare_runtime(schema& s) {
  key(s, "runtime.engine", "Engines behind the actors: gemma4 (the model) or fake (deterministic stand-ins that exercise the runtime)")
      .choice<engine_kind>({{"gemma4", engine_kind::gemma4}, {"fake", engine_kind::fake}}, "gemma4",
                           [](R& r) -> auto& { return r.runtime.engine; });
  key(s, "runtime.fake_weight_mb", "Fake engines: size of the fake model's weights in MiB").integer(16).at_least(1)
      .at_most(65536).to([](R& r) -> auto& { return r.runtime.fake_weight_mb; });
  key(s, "runtime.heartbeat_interval_ms", "Heartbeats between the controller and every worker, both ways")
      .integer(1000).at_least(10).at_most(3'600'000).to([](R& r) -> auto& { return r.runtime.heartbeat_interval_ms; });
  key(s, "runtime.heartbeat_timeout_ms", "A worker silent this long is declared dead or hung and the run fails naming it")
      .integer(10000).at_least(100).at_most(86'400'000).to([](R& r) -> auto& { return r.runtime.heartbeat_timeout_ms; });
  key(s, "runtime.request_timeout_s", "Deadline of one generate, logprob, train or refit request")
      .integer(1800).at_least(1).at_most(604'800).to([](R& r) -> auto& { return r.runtime.request_timeout_s; });
}

schema build() {
  schema s;
  declare_grpo(s);
  declare_loss(s);
  declare_policy(s);
  declare_data_env(s);
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
