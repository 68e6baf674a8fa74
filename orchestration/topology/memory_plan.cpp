// The per-phase memory estimate. Conventions: compute dtype policy.precision's (bfloat16 on cuda,
// float32 on cpu unless set), the weights and their gradients in it; parameters, gradients and
// optimizer state are sharded over data-parallel ranks and gathered one unit (layer or embedding
// table) at a time, double-buffered.
#include "orchestration/topology/memory_plan.h"

#include <cmath>

#include <algorithm>
#include <cstdio>

namespace tandem::topology {
namespace {

using config::recompute_granularity;
using config::state_dtype;

double bytes_of(state_dtype t) { return t == state_dtype::float32 ? 4.0 : 2.0; }

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

/// Rows the generator's head runs at once.
std::int64_t head_rows(const config::recipe_config& c) {
  return std::min(c.policy.generation.max_num_sequences, generation_head_rows);
}

/// What a process's runtime holds on its device beyond its tensors (none on the CPU).
double runtime_bytes(const config::recipe_config& c) {
  return c.cluster.backend == config::compute_backend::cuda ? cuda_runtime_bytes : 0.0;
}

}  // namespace

double phase_budget::total_bytes() const {
  double t = 0;
  for (const auto& i : items) t += i.bytes;
  return t;
}

double generation_head_bytes(const config::recipe_config& c, std::int64_t vocab_size) {
  return static_cast<double>(head_rows(c)) * static_cast<double>(vocab_size) * (bytes_of(config::compute_dtype(c)) + 4.0);
}

double generation_working_bytes(const config::recipe_config& c, std::int64_t vocab_size) {
  return generation_head_bytes(c, vocab_size) + runtime_bytes(c);
}

memory_plan plan_memory(const config::recipe_config& c, const worlds& w, const model_facts& m) {
  memory_plan plan;
  plan.device_bytes = c.cluster.device_memory_gib * 1024.0 * 1024.0 * 1024.0;
  const bool bf16 = config::compute_dtype(c) == state_dtype::bfloat16;
  const double cb = bytes_of(config::compute_dtype(c));
  const char* compute_name = bf16 ? "bfloat16" : "float32";
  const double P = static_cast<double>(m.parameters);
  const double dp = static_cast<double>(std::max<std::int64_t>(w.data_parallel_size, 1));
  const std::string shard = dp > 1 ? ", 1/" + std::to_string(static_cast<long long>(dp)) + " shard" : "";
  const auto& opt = c.policy.optimizer;
  // The parameters are the master weights when master_weights_dtype is their dtype (policy.precision's:
  // bfloat16 on cuda, float32 on cpu unless set); otherwise the master is a separate copy in its own dtype.
  const double master = bytes_of(opt.master_weights_dtype) == cb ? 0 : bytes_of(opt.master_weights_dtype);
  const double moments = bytes_of(opt.first_moment_dtype) + bytes_of(opt.second_moment_dtype);
  const double seq = static_cast<double>(c.policy.max_total_sequence_length);
  const double V = static_cast<double>(m.vocab_size);
  const double chunk = static_cast<double>(c.policy.logprob_chunk_size);

  const memory_item params{std::string("parameters (") + compute_name + shard + ")", P * cb / dp};
  const memory_item gathered{"gathered unit, double-buffered (" + std::to_string(m.largest_gathered_unit) + " elements)",
                             dp > 1 ? 2.0 * static_cast<double>(m.largest_gathered_unit) * cb : 0.0};
  const memory_item master_item{"master weights" + shard, P * master / dp};
  const memory_item moment_item{"AdamW moments" + shard, P * moments / dp};

  double saved = static_cast<double>(m.saved_activations_none);
  if (c.policy.recompute == recompute_granularity::selective) saved = static_cast<double>(m.saved_activations_selective);
  if (c.policy.recompute == recompute_granularity::full)
    saved = static_cast<double>(m.saved_activations_full + m.layer_working_activations);
  const double train_tokens = static_cast<double>(c.policy.train_micro_batch_size) * seq;

  plan.training.phase = "training";
  plan.training.items = {params, gathered, {std::string("gradients (") + compute_name + shard + ")", P * cb / dp}, master_item, moment_item,
                         {"activations (" + std::to_string(static_cast<long long>(train_tokens)) + " tokens per micro-batch)",
                          train_tokens * saved * cb},
                         {"logits and their gradient (chunk of " + std::to_string(c.policy.logprob_chunk_size) + " tokens, float32)",
                          2.0 * chunk * V * 4.0}};
  const memory_item runtime{"CUDA context, library handles and workspaces (measured)", runtime_bytes(c)};
  plan.training.items.push_back(runtime);
  // Without recompute the Gemma 4 engines keep the head's logits of the whole micro-batch for the
  // backward, which then skips the head's product.
  if (c.policy.recompute == recompute_granularity::none)
    plan.training.items.push_back({"head logits kept for the backward (" + std::to_string(static_cast<long long>(train_tokens)) +
                                       " tokens, recompute none)",
                                   train_tokens * V * cb});

  // null: each rank scores its whole share of the step's rollouts in one pass.
  const double rollouts = static_cast<double>(c.grpo.num_prompts_per_step * c.grpo.num_generations_per_prompt);
  const double lp_batch = c.policy.logprob_batch_size ? static_cast<double>(*c.policy.logprob_batch_size)
                                                      : std::ceil(rollouts / dp);
  const double lp_tokens = lp_batch * seq;
  plan.logprobs.phase = "logprobs";
  plan.logprobs.items = {params, gathered};
  if (!c.policy.offload_optimizer_for_logprob) {
    plan.logprobs.items.push_back(master_item);
    plan.logprobs.items.push_back(moment_item);
  }
  plan.logprobs.items.push_back({"activations of one layer (" + std::to_string(static_cast<long long>(lp_tokens)) + " tokens)",
                                 lp_tokens * static_cast<double>(m.layer_working_activations) * cb});
  plan.logprobs.items.push_back({"logits (chunk, float32)", chunk * V * 4.0});
  plan.logprobs.items.push_back(runtime);

  plan.generation.phase = "generation";
  const bool zero_copy = w.colocated && dp == 1;  // the rollout engine reads the trainer's weights
  plan.generation.items = {{std::string("weights (") + compute_name + (zero_copy ? ", shared with training" : ", full copy") + ")",
                            P * cb}};
  if (!w.colocated && c.policy.refit.receive == config::refit_receive_mode::staging)  // a refit's buckets land in it
    plan.generation.items.push_back({std::string("refit staging copy (") + compute_name + ", policy.refit.receive staging)", P * cb});
  if (w.colocated) {
    if (!zero_copy) plan.generation.items.push_back({"training parameters" + shard + ", resident", P * cb / dp});
    if (!c.policy.offload_optimizer_for_generation) {
      plan.generation.items.push_back(master_item);
      plan.generation.items.push_back(moment_item);
    }
  }
  plan.generation.items.push_back({"head logits and sampler scratch (" + std::to_string(head_rows(c)) + " rows at a time)",
                                   generation_head_bytes(c, m.vocab_size)});
  plan.generation.items.push_back(runtime);
  const double usable = plan.device_bytes * c.policy.generation.gpu_memory_utilization;
  // A sequence of the longest allowed length: full layers cache every position, sliding layers
  // at most the window. The generator makes no more cache than max_num_sequences of them need.
  const double per_sequence =
      cb * (static_cast<double>(m.kv_elements_per_token_full) * seq +
            static_cast<double>(m.kv_elements_per_token_sliding) * std::min(seq, static_cast<double>(m.sliding_window)));
  plan.kv_cache_bytes = std::min(usable - plan.generation.total_bytes(),
                                 static_cast<double>(c.policy.generation.max_num_sequences) * per_sequence);
  plan.kv_cache_sequences = plan.kv_cache_bytes > 0 && per_sequence > 0 ? plan.kv_cache_bytes / per_sequence : 0;
  plan.kv_cache_tokens = plan.kv_cache_sequences * seq;
  char utilization[16];
  std::snprintf(utilization, sizeof utilization, "%.2f", c.policy.generation.gpu_memory_utilization);
  plan.generation.items.push_back({std::string("KV cache (policy.generation.gpu_memory_utilization ") + utilization + ")",
                                   std::max(plan.kv_cache_bytes, 0.0)});

  for (const phase_budget* p : {&plan.training, &plan.logprobs}) {
    if (p->total_bytes() > plan.device_bytes)
      plan.warnings.push_back(p->phase + " needs " + gib(p->total_bytes()) + " per device, more than its " +
                              gib(plan.device_bytes) + " (cluster.device_memory_gib)");
  }
  if (plan.kv_cache_tokens < seq)
    plan.warnings.push_back("generation leaves room for " + std::to_string(static_cast<long long>(plan.kv_cache_tokens)) +
                            " KV-cache tokens, less than one sequence of policy.max_total_sequence_length (" +
                            std::to_string(c.policy.max_total_sequence_length) + ")");
  return plan;
}

}  // namespace tandem::topology
