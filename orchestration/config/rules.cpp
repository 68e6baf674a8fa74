// The cross-field rules, one function per concern.
#include "orchestration/config/rules.h"

#include <cstdio>
#include <initializer_list>
#include <string>

#include "orchestration/config/checked_int.h"
#include "orchestration/config/resolve.h"
#include "orchestration/topology/worlds.h"

namespace tandem::config {

bool loopback_host(const std::string& h) {
  if (h == "localhost" || h == "::1") return true;
  int a = -1, b = -1, c = -1, d = -1;
  char tail = 0;
  return std::sscanf(h.c_str(), "%d.%d.%d.%d%c", &a, &b, &c, &d, &tail) == 4 && a == 127 && b >= 0 && b < 256 && c >= 0 &&
         c < 256 && d >= 0 && d < 256;
}

namespace {

class rule_checker {
 public:
  explicit rule_checker(const resolved_recipe& r) : r_(r), c_(r.config) {}

  config_errors run() {
    const std::size_t before = errors_.size();
    cluster_fit();
    batch_sizes(errors_.size() == before);
    lengths();
    algorithm();
    validation_and_checkpoints();
    runtime();
    return std::move(errors_);
  }

 private:
  // How specific an origin is: overrides > the recipe's own file > parents > defaults.
  int rank(const source_location& o) const {
    if (o.is_override()) return 3;
    if (o.file == r_.file) return 2;
    if (!o.is_default()) return 1;
    return 0;
  }

  void fail(std::initializer_list<const char*> keys, std::string message) {
    const char* best = *keys.begin();
    for (const char* k : keys)
      if (rank(r_.origin(k)) > rank(r_.origin(best))) best = k;
    source_location where = r_.origin(best);
    if (where.is_default()) where = source_location{r_.file, 1, 1, 0};
    errors_.push_back({where, best, std::move(message)});
  }

  static std::string n(std::int64_t v) { return std::to_string(v); }

  void network() {
    const auto& cl = c_.cluster;
    if (cl.controller_host == "0.0.0.0" || cl.controller_host == "::" || cl.controller_host == "*" ||
        cl.controller_host.empty())
      fail({"cluster.controller_host"}, "'" + cl.controller_host +
                                            "' binds every interface: name the address of the one the members reach "
                                            "the controller on (a run binds only that interface)");
    else if (!cl.secure && !loopback_host(cl.controller_host))
      fail({"cluster.secure", "cluster.controller_host"},
           "false is accepted only when every address is loopback, but cluster.controller_host is " + cl.controller_host +
               ": without CurveZMQ anyone who reaches the port can join the run or feed it weights");
  }

  /// env.external.* configures env.name external only: set with another environment, it would be
  /// ignored; external without a command has nothing to run.
  void environment() {
    const bool external = c_.env.name == environment_kind::external;
    if (external && !c_.env.external.command)
      fail({"env.name", "env.external.command"}, "env.name external needs env.external.command: the reward process to run");
    if (external && c_.env.external.command && c_.env.external.command->find_first_not_of(" \t") == std::string::npos)
      fail({"env.external.command"}, "is empty: name the reward process to run");
    if (!external && c_.env.external.command)
      fail({"env.external.command", "env.name"}, "is read only with env.name external; the environment is " +
                                                      std::string(c_.env.name == environment_kind::parity ? "parity" : "another"));
    if (!external && c_.env.external.timeout_s != default_external_timeout_s)
      fail({"env.external.timeout_s", "env.name"}, "is read only with env.name external");
    if (c_.env.name != environment_kind::arithmetic && c_.env.arithmetic.max_operand != default_arithmetic_max_operand)
      fail({"env.arithmetic.max_operand", "env.name"}, "is read only with env.name arithmetic");
    if (c_.env.name != environment_kind::math && c_.env.math.checker != math_checker::answer_line)
      fail({"env.math.checker", "env.name"}, "is read only with env.name math");
    if (c_.env.name == environment_kind::math && !c_.data.train_dataset)
      fail({"env.name", "data.train_dataset"}, "env.name math checks the answers of a dataset's records: set data.train_dataset");
    const bool text = c_.data.train_dataset || c_.env.name == environment_kind::arithmetic || c_.env.name == environment_kind::math;
    if (text && c_.runtime.engine == engine_kind::fake)
      fail({"runtime.engine", c_.data.train_dataset ? "data.train_dataset" : "env.name"},
           "fake: the fake engines have no tokenizer; text prompts (a dataset, env.name arithmetic or math) need runtime.engine gemma4");
    if (c_.data.validation_dataset && !c_.data.train_dataset)
      fail({"data.validation_dataset", "data.train_dataset"}, "a validation dataset goes with a training dataset: set data.train_dataset");
    warm_up();
  }

  void warm_up() {
    const auto& w = c_.sft;
    if (w.max_num_steps == 0) {
      if (w.lr != default_sft_lr) fail({"sft.lr", "sft.max_num_steps"}, "configures the warm-up, which sft.max_num_steps 0 leaves out");
      if (w.batch_size != default_sft_batch_size)
        fail({"sft.batch_size", "sft.max_num_steps"}, "configures the warm-up, which sft.max_num_steps 0 leaves out");
      return;
    }
    if (c_.env.name == environment_kind::parity && !c_.data.train_dataset)
      fail({"sft.max_num_steps", "env.name"}, "the warm-up trains on the prompts' answers, which the parity task has none of: "
                                              "use env.name arithmetic or a data.train_dataset");
  }

  void runtime() {
    environment();
    network();
    const auto& rt = c_.runtime;
    const auto twice = checked_mul(2, rt.heartbeat_interval_ms);
    if (!twice || rt.heartbeat_timeout_ms < *twice)
      fail({"runtime.heartbeat_timeout_ms", "runtime.heartbeat_interval_ms"},
           "must be at least twice runtime.heartbeat_interval_ms (" + n(rt.heartbeat_interval_ms) +
               "), or one late heartbeat declares a healthy member dead; got " + n(rt.heartbeat_timeout_ms));
  }

  void cluster_fit() {
    const auto& g = c_.policy.generation;
    const auto G = c_.cluster.gpus_per_node, N = c_.cluster.num_nodes;
    const char* gpn = "policy.generation.colocated.resources.gpus_per_node";
    const char* nn = "policy.generation.colocated.resources.num_nodes";
    const char* enabled = "policy.generation.colocated.enabled";
    if (g.colocated) {
      if (g.resources.gpus_per_node)
        fail({gpn}, "only used by non-colocated generation, but policy.generation.colocated.enabled is true");
      if (g.resources.num_nodes)
        fail({nn}, "only used by non-colocated generation, but policy.generation.colocated.enabled is true");
      return;
    }
    if (N == 1) {
      if (!g.resources.gpus_per_node) {
        fail({enabled}, "non-colocated generation on one node needs its own GPUs: set " + std::string(gpn) +
                            " (1 to " + n(G - 1) + ")");
      } else if (*g.resources.gpus_per_node >= G) {
        fail({gpn, "cluster.gpus_per_node"}, n(*g.resources.gpus_per_node) +
                 " generation GPUs leave none for training on one node of " + n(G) + " (cluster.gpus_per_node)");
      }
      if (g.resources.num_nodes && *g.resources.num_nodes != 1)
        fail({nn, "cluster.num_nodes"}, "dedicated generation nodes need more than one node (cluster.num_nodes is 1)");
      return;
    }
    if (!g.resources.num_nodes) {
      fail({enabled}, "non-colocated generation on " + n(N) + " nodes needs dedicated nodes: set " +
                          std::string(nn) + " (1 to " + n(N - 1) + ")");
    } else if (*g.resources.num_nodes >= N) {
      fail({nn, "cluster.num_nodes"}, n(*g.resources.num_nodes) + " generation nodes leave none for training (cluster.num_nodes is " + n(N) + ")");
    }
    if (g.resources.gpus_per_node && *g.resources.gpus_per_node != G)
      fail({gpn, "cluster.gpus_per_node"}, "dedicated generation nodes use all their GPUs: must be null or " +
                                               n(G) + " (cluster.gpus_per_node), got " + n(*g.resources.gpus_per_node));
  }

  void batch_sizes(bool cluster_fits) {
    const auto& p = c_.policy;
    const char* counts[] = {"grpo.num_prompts_per_step", "grpo.num_generations_per_prompt"};
    const auto product = checked_mul(c_.grpo.num_prompts_per_step, c_.grpo.num_generations_per_prompt);
    if (!product) {
      fail({counts[0], counts[1]}, "grpo.num_prompts_per_step x grpo.num_generations_per_prompt overflows a 64-bit count");
      return;
    }
    const std::int64_t rollouts = *product;
    // Every rollout of a step, at full length, must be addressable by a packed batch's offsets.
    const auto step_tokens = checked_mul(rollouts, p.max_total_sequence_length);
    if (!step_tokens || *step_tokens > max_packed_tokens)
      fail({counts[0], counts[1], "policy.max_total_sequence_length"},
           "a step of " + n(rollouts) + " rollouts of up to " + n(p.max_total_sequence_length) +
               " tokens holds more than " + n(max_packed_tokens) + " tokens, the most a packed batch addresses");
    if (rollouts % p.train_global_batch_size != 0)
      fail({"grpo.num_prompts_per_step", "grpo.num_generations_per_prompt", "policy.train_global_batch_size"},
           "rollouts per step, grpo.num_prompts_per_step (" + n(c_.grpo.num_prompts_per_step) +
               ") x grpo.num_generations_per_prompt (" + n(c_.grpo.num_generations_per_prompt) + ") = " + n(rollouts) +
               ", must be a multiple of policy.train_global_batch_size (" + n(p.train_global_batch_size) + ")");
    if (cluster_fits) {  // the data-parallel size needs a cluster that fits
      const topology::worlds w = topology::compute_worlds(c_);
      const std::int64_t dp = w.data_parallel_size;
      const std::int64_t model_parallel = p.tensor_parallel_size * p.context_parallel_size;  // each <= 2^16
      if (dp == 0 || w.training_devices % model_parallel != 0) {
        fail({"policy.tensor_parallel_size", "policy.context_parallel_size", "cluster.gpus_per_node", "cluster.num_nodes"},
             "the " + n(w.training_devices) + " training devices are not a multiple of policy.tensor_parallel_size x "
             "policy.context_parallel_size (" + n(model_parallel) + ")");
        return;
      }
      const auto per_pass = checked_mul(dp, p.train_micro_batch_size);
      if (!per_pass || p.train_global_batch_size % *per_pass != 0)
        fail({"policy.train_global_batch_size", "policy.train_micro_batch_size", "cluster.num_nodes",
              "cluster.gpus_per_node"},
             "policy.train_global_batch_size (" + n(p.train_global_batch_size) +
                 ") must be a multiple of the data-parallel size (" + n(dp) +
                 " training devices) x policy.train_micro_batch_size (" + n(p.train_micro_batch_size) + ") = " +
                 (per_pass ? n(*per_pass) : std::string("more than 2^63")));
    }
  }

  void lengths() {
    const auto in = c_.data.max_input_seq_length, out = c_.policy.generation.max_new_tokens,
               total = c_.policy.max_total_sequence_length;
    const auto sum = checked_add(in, out);
    if (!sum || *sum > total)
      fail({"policy.max_total_sequence_length", "data.max_input_seq_length", "policy.generation.max_new_tokens"},
           "data.max_input_seq_length (" + n(in) + ") + policy.generation.max_new_tokens (" + n(out) + ") = " +
               (sum ? n(*sum) : std::string("more than 2^63")) + " exceeds policy.max_total_sequence_length (" + n(total) + ")");
    const auto& s = c_.grpo.reward_shaping;
    if (s.enabled && s.overlong_buffer_length >= s.max_response_length)
      fail({"grpo.reward_shaping.overlong_buffer_length", "grpo.reward_shaping.max_response_length"},
           "the overlong buffer (" + n(s.overlong_buffer_length) +
               " tokens) must be shorter than grpo.reward_shaping.max_response_length (" + n(s.max_response_length) + ")");
  }

  void algorithm() {
    const auto& g = c_.grpo;
    if (g.batch_multiplier > 1 && !g.use_dynamic_sampling)
      fail({"grpo.batch_multiplier", "grpo.use_dynamic_sampling"},
           "batch_multiplier " + n(g.batch_multiplier) +
               " generates extra prompts for dynamic sampling, but grpo.use_dynamic_sampling is false");
    const auto& sc = g.reward_scaling;
    if (sc.enabled && !(sc.source_min < sc.source_max))
      fail({"grpo.reward_scaling.source_max", "grpo.reward_scaling.source_min"},
           "source_min must be below source_max");
    if (sc.enabled && sc.target_min == sc.target_max)
      fail({"grpo.reward_scaling.target_max", "grpo.reward_scaling.target_min"},
           "target_min equals target_max: every reward would become the same");
    if (g.advantage_clip_low && g.advantage_clip_high && !(*g.advantage_clip_low < *g.advantage_clip_high))
      fail({"grpo.advantage_clip_high", "grpo.advantage_clip_low"}, "advantage_clip_low must be below advantage_clip_high");
    const auto& l = c_.loss_fn;
    if (l.use_importance_sampling_correction && l.truncated_importance_sampling_type != importance_sampling_type::tis &&
        !l.truncated_importance_sampling_ratio)
      fail({"loss_fn.truncated_importance_sampling_type", "loss_fn.truncated_importance_sampling_ratio"},
           "icepop and seq-mask-tis need an upper bound: set loss_fn.truncated_importance_sampling_ratio");
    if (l.truncated_importance_sampling_ratio &&
        !(l.truncated_importance_sampling_ratio_min < *l.truncated_importance_sampling_ratio))
      fail({"loss_fn.truncated_importance_sampling_ratio_min", "loss_fn.truncated_importance_sampling_ratio"},
           "the lower bound must be below loss_fn.truncated_importance_sampling_ratio");
    if (g.max_trajectory_age_steps > 0 && !l.use_importance_sampling_correction)
      fail({"grpo.max_trajectory_age_steps", "loss_fn.use_importance_sampling_correction"},
           "off-policy trajectories need loss_fn.use_importance_sampling_correction: true");
    if (g.max_trajectory_age_steps > 0 && c_.policy.generation.colocated)
      fail({"grpo.max_trajectory_age_steps", "policy.generation.colocated.enabled"},
           "one-step off-policy generation overlaps generating with training, which share the devices when colocated: "
           "it needs dedicated rollout devices (policy.generation.colocated.enabled: false)");
    if (g.max_trajectory_age_steps > 0 && g.use_dynamic_sampling)
      fail({"grpo.max_trajectory_age_steps", "grpo.use_dynamic_sampling"},
           "one-step off-policy generation with dynamic sampling is not built yet: turn one of them off");
  }

  void validation_and_checkpoints() {
    const auto& g = c_.grpo;
    const bool validates = g.val_period > 0 || g.val_at_start || g.val_at_end;
    // Without a dataset a task validates on held-out prompts of its own (the parity task's of
    // another seed, which an external environment scores too; the arithmetic task's held-out
    // problems). A training dataset validates on a dataset of its own.
    if (validates && !c_.data.validation_dataset && c_.data.train_dataset)
      fail({"grpo.val_period", "grpo.val_at_start", "grpo.val_at_end", "data.validation_dataset"},
           "validation is on but data.validation_dataset is null; a run on a training dataset validates on a "
           "dataset of its own");
    const auto& m = c_.checkpointing.metric_name;
    if (c_.checkpointing.enabled && m && m->starts_with("val:") && !validates)
      fail({"checkpointing.metric_name", "grpo.val_period"},
           "ranks checkpoints by a validation metric, but validation is off (grpo.val_period is 0)");
  }

  const resolved_recipe& r_;
  const recipe_config& c_;
  config_errors errors_;
};

}  // namespace

config_errors check_rules(const resolved_recipe& r) { return rule_checker(r).run(); }

}  // namespace tandem::config
