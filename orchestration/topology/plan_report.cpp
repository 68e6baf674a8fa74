// Rendering the dry-run plan as aligned text.
#include "orchestration/topology/plan_report.h"

#include <cstdio>

namespace tandem::topology {
namespace {

std::string fmt(const char* f, double a) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, a);
  return buf;
}

/// GiB from 1 GiB up, MiB below, so toy models show figures too.
std::string gib(double bytes) {
  if (bytes >= 1024.0 * 1024.0 * 1024.0) return fmt("%9.2f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return fmt("%9.2f MiB", bytes / (1024.0 * 1024.0));
}

std::string count(std::int64_t n) {
  if (n >= 1'000'000'000) return fmt("%.2fB", static_cast<double>(n) / 1e9);
  if (n >= 1'000'000) return fmt("%.2fM", static_cast<double>(n) / 1e6);
  if (n >= 1'000) return fmt("%.1fK", static_cast<double>(n) / 1e3);
  return std::to_string(n);
}

std::string pad(std::string s, std::size_t n) {
  if (s.size() < n) s.resize(n, ' ');
  return s;
}

void phase(std::string& out, const phase_budget& b, double device) {
  out += "  " + b.phase + " (per " + (b.phase == "generation" ? "rollout" : "policy") + " device)\n";
  for (const auto& i : b.items)
    if (i.bytes > 0 || i.what.starts_with("KV cache")) out += "    " + pad(i.what, 62) + gib(i.bytes) + "\n";
  out += "    " + pad("total", 62) + gib(b.total_bytes()) + fmt("   (%.0f%% of the device)\n", 100.0 * b.total_bytes() / device);
}

}  // namespace

std::string render_plan(const config::resolved_recipe& r, const model_facts& m, const placement_plan& p,
                        const memory_plan& mem) {
  const auto& c = r.config;
  const bool cuda = c.cluster.backend == config::compute_backend::cuda;
  std::string out;
  out += "tandem run " + r.file + " (dry run: nothing is started)\n\n";
  out += "model       " + m.name + " (" + m.model_type + ", " + std::to_string(m.num_layers) + " layers, " +
         count(m.parameters) + " parameters)\n";
  const bool bf16 = config::compute_dtype(c) == config::state_dtype::bfloat16;
  out += std::string("backend     ") + (cuda ? "cuda" : "cpu") + (bf16 ? " (bfloat16 compute, float32 accumulation)" : cuda ? " (float32 compute)" : " (float32 reference)") + "\n";
  out += "cluster     " + std::to_string(c.cluster.num_nodes) + " node(s) x " + std::to_string(c.cluster.gpus_per_node) +
         (cuda ? " GPU(s)" : " CPU device(s)") + ", " + fmt("%.1f GiB", c.cluster.device_memory_gib) + " per device\n";
  if (p.sizes.colocated) {
    out += "topology    colocated: every device runs one member hosting a policy_worker and a rollout_worker;\n"
           "            they take turns, and refit is a version bump over the shared weights\n";
  } else {
    out += "topology    dedicated rollout " + std::string(c.cluster.num_nodes == 1 ? "devices" : "nodes") + ": " +
           std::to_string(p.sizes.training_devices) + " training device(s) on " + std::to_string(p.sizes.training_nodes) +
           " node(s), " + std::to_string(p.sizes.generation_devices) + " generation device(s) on " +
           std::to_string(p.sizes.generation_nodes) + " node(s); refit streams weight buckets over " +
           (cuda ? "NCCL" : "ZeroMQ") + "\n";
  }
  out += "controller  control plane " + p.control_endpoint + " (ZeroMQ ROUTER; each member dials it with a DEALER)\n";
  out += std::string("            data plane: member to member (") +
         (cuda ? "NCCL communicators, ids handed out by the controller" : "ZeroMQ, endpoints handed out by the controller") +
         "); no weight or gradient bytes pass through the controller\n\n";

  out += "members (one process per device)\n";
  out += "  " + pad("rank", 6) + pad("node", 6) + pad("device", 9) + pad("actors", 32) + pad("dp rank", 9) + "rollout rank\n";
  for (const auto& w : p.members) {
    std::string actors = w.hosts_policy && w.hosts_rollout ? "policy_worker + rollout_worker"
                         : w.hosts_policy                  ? "policy_worker"
                                                           : "rollout_worker";
    out += "  " + pad(std::to_string(w.rank), 6) + pad(std::to_string(w.node), 6) +
           pad((cuda ? "cuda:" : "cpu:") + std::to_string(w.device), 9) + pad(actors, 32) +
           pad(w.data_parallel_rank >= 0 ? std::to_string(w.data_parallel_rank) + "/" + std::to_string(p.sizes.data_parallel_size) : "-", 9) +
           (w.rollout_rank >= 0 ? std::to_string(w.rollout_rank) + "/" + std::to_string(p.sizes.generation_devices) : "-") + "\n";
  }

  const auto& g = c.grpo;
  const std::int64_t rollouts = g.num_prompts_per_step * g.num_generations_per_prompt;
  const std::int64_t opt_steps = rollouts / c.policy.train_global_batch_size;
  const std::int64_t per_rank = c.policy.train_global_batch_size / p.sizes.data_parallel_size;
  out += "\nstep        " + std::to_string(g.num_prompts_per_step * g.batch_multiplier) + " prompts per generation round x " +
         std::to_string(g.num_generations_per_prompt) + " samples; " + std::to_string(rollouts) + " rollouts trained per step\n";
  out += "            " + std::to_string(opt_steps) + " optimizer step(s) per step, " + std::to_string(per_rank) +
         " samples per data-parallel rank each, in micro-batches of at most " +
         std::to_string(c.policy.train_micro_batch_size * c.policy.max_total_sequence_length) + " tokens (" +
         std::to_string(c.policy.train_micro_batch_size) + " x " + std::to_string(c.policy.max_total_sequence_length) +
         "-token samples; at most " +
         std::to_string((per_rank + c.policy.train_micro_batch_size - 1) / c.policy.train_micro_batch_size) +
         " per optimizer step)\n";
  out += "            weights may be at most " + std::to_string(g.max_trajectory_age_steps) +
         " step(s) older than the trainer's when a trajectory is accepted\n\n";

  out += "memory (estimates; engines size slabs and the KV cache from real free memory at run time)\n";
  phase(out, mem.training, mem.device_bytes);
  phase(out, mem.logprobs, mem.device_bytes);
  phase(out, mem.generation, mem.device_bytes);
  out += "    " + pad("KV cache capacity", 62) + fmt("%12.0f tokens", mem.kv_cache_tokens) +
         fmt(" (%.1f sequences of ", mem.kv_cache_sequences) + std::to_string(c.policy.max_total_sequence_length) +
         " tokens; sliding-window layers cache at most " + std::to_string(m.sliding_window) + " per sequence)\n";
  for (const auto& w : mem.warnings) out += "warning: " + w + "\n";
  return out;
}

}  // namespace tandem::topology
