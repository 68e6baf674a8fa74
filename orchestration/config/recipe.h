// The typed, fully resolved recipe. Every field is declared, with its key, default, range and
// description, in schema.cpp (the one place defaults live); nothing reads YAML after resolution.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tandem::config {

enum class compute_backend { cpu, cuda };
enum class recompute_granularity { none, selective, full };
enum class state_dtype { float32, bfloat16 };
/// policy.precision: the dtype the Gemma 4 engines store weights and activations in (automatic:
/// float32 on the cpu backend, bfloat16 on cuda; compute_dtype() resolves it).
enum class compute_precision { automatic, float32, bfloat16 };
enum class importance_sampling_type { tis, icepop, seq_mask_tis };
enum class environment_kind { parity, arithmetic, math, external };
enum class engine_kind { gemma4, fake };
enum class math_checker { answer_line, strict_boxed };

struct reward_scaling_config {
  bool enabled{};
  double source_min{}, source_max{};  // clamp rewards to this range ...
  double target_min{}, target_max{};  // ... then map it linearly onto this one
};

struct reward_shaping_config {
  bool enabled{};
  std::int64_t overlong_buffer_length{};  // tokens before max_response_length where the penalty ramps
  double overlong_buffer_penalty{};
  std::int64_t max_response_length{};
};

struct grpo_config {
  std::int64_t num_prompts_per_step{};
  std::int64_t num_generations_per_prompt{};
  std::int64_t max_num_steps{};
  std::int64_t max_num_epochs{};
  bool normalize_rewards{};
  bool use_leave_one_out_baseline{};
  bool use_dynamic_sampling{};
  std::int64_t batch_multiplier{};
  std::int64_t dynamic_sampling_max_gen_batches{};
  reward_scaling_config reward_scaling;
  reward_shaping_config reward_shaping;
  bool overlong_filtering{};
  std::optional<double> advantage_clip_low, advantage_clip_high;
  std::int64_t max_trajectory_age_steps{};
  std::int64_t val_period{};
  bool val_at_start{}, val_at_end{};
  std::int64_t max_val_samples{};
  std::int64_t val_batch_size{};
  std::int64_t seed{};
};

struct loss_config {
  double reference_policy_kl_penalty{};
  double kl_input_clamp_value{};
  double kl_output_clamp_value{};
  double ratio_clip_min{};
  double ratio_clip_max{};
  std::optional<double> ratio_clip_c;
  bool use_importance_sampling_correction{};
  importance_sampling_type truncated_importance_sampling_type{};
  std::optional<double> truncated_importance_sampling_ratio;
  double truncated_importance_sampling_ratio_min{};  // icepop / seq-mask-tis lower bound
  bool token_level_loss{};
  bool use_on_policy_kl_approximation{};
  bool force_on_policy_ratio{};
};

struct optimizer_config {
  double lr{};
  double weight_decay{};
  double beta1{}, beta2{}, eps{};
  state_dtype master_weights_dtype{};
  state_dtype first_moment_dtype{};
  state_dtype second_moment_dtype{};
};

struct scheduler_config {
  std::int64_t warmup_steps{};
  double warmup_start_factor{};
};

struct generation_resources_config {
  std::optional<std::int64_t> gpus_per_node;
  std::optional<std::int64_t> num_nodes;
};

struct generation_config {
  std::int64_t max_new_tokens{};
  double temperature{};
  double top_p{};
  std::optional<std::int64_t> top_k;
  std::optional<std::vector<std::int64_t>> stop_token_ids;
  bool colocated{};
  generation_resources_config resources;
  double gpu_memory_utilization{};
  std::int64_t max_num_sequences{};
  std::int64_t tensor_parallel_size{};
};

/// Where a dedicated rollout worker writes a refit's buckets: a second copy of the weights (the
/// old version serves, and survives a failed refit), or over the live weights (memory for one copy).
enum class refit_receive_mode { staging, in_place };

/// How new weights reach the rollout workers after every step (DESIGN.md section 4).
struct refit_config {
  std::int64_t bucket_mb{};  // bucket size: the weights move in buckets of this many MiB
  bool checksums{};          // every bucket carries a checksum, verified before it is staged
  refit_receive_mode receive{};
};

struct policy_config {
  std::string model_name;
  compute_precision precision{};
  std::int64_t train_global_batch_size{};
  std::int64_t train_micro_batch_size{};
  std::optional<std::int64_t> logprob_batch_size;  // null: a rank's whole share per pass
  std::int64_t max_total_sequence_length{};
  std::int64_t logprob_chunk_size{};
  std::optional<double> max_grad_norm{};
  bool offload_optimizer_for_logprob{};
  bool offload_optimizer_for_generation{};
  recompute_granularity recompute{};
  std::int64_t tensor_parallel_size{};
  std::int64_t context_parallel_size{};
  std::int64_t expert_parallel_size{};
  generation_config generation;
  optimizer_config optimizer;
  scheduler_config scheduler;
  refit_config refit;
};

struct data_config {
  std::optional<std::string> train_dataset;  // null: the engines' own prompts (fake)
  std::optional<std::string> validation_dataset;
  std::int64_t max_input_seq_length{};
  bool shuffle{};
};

/// env.external.timeout_s's default (a rule refuses another value without env.name external).
inline constexpr std::int64_t default_external_timeout_s = 60;

struct external_env_config {
  std::optional<std::string> command{};  ///< run as /bin/sh -c COMMAND
  std::int64_t timeout_s{};
};

/// Defaults a rule compares against (schema.cpp declares them with these values).
inline constexpr std::int64_t default_arithmetic_max_operand = 99;
inline constexpr double default_sft_lr = 1e-4;
inline constexpr std::int64_t default_sft_batch_size = 32;

struct arithmetic_env_config {
  std::int64_t max_operand{};  ///< problems a + b with a, b in [0, max_operand]
};

struct math_env_config {
  math_checker checker{};
};

struct env_config {
  environment_kind name{};
  std::int64_t num_workers{};
  external_env_config external{};
  arithmetic_env_config arithmetic{};
  math_env_config math{};
};

/// The supervised warm-up before the RL phase.
struct sft_config {
  std::int64_t max_num_steps{};  ///< 0: no warm-up
  double lr{};                   ///< its peak learning rate (policy.optimizer.lr is the RL phase's)
  std::int64_t batch_size{};     ///< examples per warm-up step
};

struct checkpoint_config {
  bool enabled{};
  std::string checkpoint_dir{};
  std::int64_t save_period{};
  std::optional<std::int64_t> keep_top_k{};
  std::optional<std::string> metric_name;
  bool higher_is_better{};
  bool save_optimizer{};
};

struct logger_config {
  std::string log_dir{};
  bool jsonl_enabled{};
  bool tensorboard_enabled{};
  bool wandb_enabled{};
  std::int64_t num_val_samples_to_print{};
};

struct cluster_config {
  compute_backend backend{};
  std::int64_t num_nodes{};
  std::int64_t gpus_per_node{};
  double device_memory_gib{};
  std::string controller_host{};
  std::int64_t controller_port{};
  bool secure{};  // CurveZMQ on every socket of the run; false only when every address is loopback
};

/// How the processes run: the engines behind the actors, liveness, deadlines.
struct runtime_config {
  engine_kind engine{};                  // gemma4 (the model) or fake (deterministic stand-ins, runtime tests)
  std::int64_t fake_weight_mb{};         // fake engines: size of the fake model's weights
  std::int64_t heartbeat_interval_ms{};  // both ways between the controller and every member
  std::int64_t heartbeat_timeout_ms{};   // silence longer than this: the member is dead or hung
  std::int64_t request_timeout_s{};      // deadline of one generate, logprob, train or refit request
};

/// A whole recipe after defaults, inheritance and overrides.
struct recipe_config {
  grpo_config grpo;
  sft_config sft;
  loss_config loss_fn;
  policy_config policy;
  data_config data;
  env_config env;
  checkpoint_config checkpointing;
  logger_config logger;
  cluster_config cluster;
  runtime_config runtime;
};

/// The dtype of the Gemma 4 engines' weights, gradients and activations: policy.precision, or
/// where it is automatic, float32 on the cpu backend (the reference) and bfloat16 on cuda.
inline state_dtype compute_dtype(const recipe_config& r) {
  switch (r.policy.precision) {
    case compute_precision::float32: return state_dtype::float32;
    case compute_precision::bfloat16: return state_dtype::bfloat16;
    case compute_precision::automatic: break;
  }
  return r.cluster.backend == compute_backend::cuda ? state_dtype::bfloat16 : state_dtype::float32;
}

}  // namespace tandem::config
