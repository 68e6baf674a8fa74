// A step's metrics record (step_metrics.hpp).
#include "actors/controller/step_metrics.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace tandem {
namespace {

using json = nlohmann::json;

double ratio(double part, double whole) { return whole > 0 ? part / whole : 0.0; }

/// An extremum that saw no token is reported as 0, not as an infinity.
double extremum(double x) { return std::isfinite(x) ? x : 0.0; }

void flatten(const json& j, const std::string& prefix, std::vector<records::tagged_scalar>& out) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string name = prefix.empty() ? it.key() : prefix + "/" + it.key();
    if (it->is_object()) flatten(*it, name, out);
    else if (it->is_number() && name != "step") out.emplace_back(name, it->get<double>());
  }
}

json refit_json(const refit_report& x) {
  return {{"mode", to_string(x.mode)}, {"buckets", x.buckets}, {"bytes", x.bytes}, {"checksums", x.checksums},
          {"dropped_acks", x.dropped_acks}};
}

json traffic_json(const socket_thread::traffic_counts& t) {
  return {{"sent", t.sent_bytes}, {"received", t.received_bytes}, {"heartbeats", t.heartbeat_bytes}};
}

constexpr double gib_bytes = 1024.0 * 1024.0 * 1024.0;

/// A colocated run's device turns (plain::device_turn_figures) under `phase` (train, sft): none
/// where no member hosts both engines (every figure zero).
void add_turn_metrics(json& record, const std::string& phase, const plain::device_turn_figures& t,
                      const memory_plan_figures& plan) {
  if (t.empty()) return;
  record["timing/" + phase + "/offload_optimizer"] = t.offload_seconds;
  record["timing/" + phase + "/restore_optimizer"] = t.restore_seconds;
  record["timing/" + phase + "/release_kv_cache"] = t.cache_release_seconds;
  record["timing/" + phase + "/restore_kv_cache"] = t.cache_restore_seconds;
  // Rates and memory only where measured: no offload (or restore) this step, or a device whose
  // memory is the host's (0 in use), leaves its key out rather than record a 0 nothing measured.
  if (t.offloads > 0) record["performance/offload_optimizer_gb_per_s"] = t.offload_gb_per_s();
  if (t.restores > 0) record["performance/restore_optimizer_gb_per_s"] = t.restore_gb_per_s();
  record["performance/host_link_gb_per_s"] = t.host_link_gb_per_s;
  record["memory/optimizer_offloaded_gib"] = static_cast<double>(t.offloaded_bytes) / gib_bytes;
  // Each phase's memory in use beside the plan's figure for it.
  if (t.training_in_use_bytes > 0) {
    record["memory/training_in_use_gib"] = static_cast<double>(t.training_in_use_bytes) / gib_bytes;
    if (plan.training_bytes > 0) record["memory/training_planned_gib"] = plan.training_bytes / gib_bytes;
  }
  if (t.generation_in_use_bytes > 0) {
    record["memory/generation_in_use_gib"] = static_cast<double>(t.generation_in_use_bytes) / gib_bytes;
    if (plan.generation_bytes > 0) record["memory/generation_planned_gib"] = plan.generation_bytes / gib_bytes;
  }
}

}  // namespace

std::string digest_hex(std::uint64_t digest) {
  char text[19];
  std::snprintf(text, sizeof text, "0x%016llx", static_cast<unsigned long long>(digest));
  return text;
}

/// Every policy rank's weights digest after the step.
json digests_json(const step_report& r) {
  json digests = json::array();
  for (const auto d : r.weights_digests) digests.push_back(digest_hex(d));
  return digests;
}

json step_record(const step_report& r, const socket_thread::traffic_counts& traffic, double seconds,
                 const step_metric_settings& s) {
  const auto& m = r.metrics;
  const double tokens = static_cast<double>(m.token_count);
  const double oob = s.importance == gpu::ops::importance_correction::seq_mask_tis
                         ? ratio(static_cast<double>(m.is_masked_sequences), static_cast<double>(m.sequence_count))
                         : ratio(static_cast<double>(m.is_truncated_tokens), tokens);
  double raw = 0, total = 0;
  for (const double x : r.raw_rewards) raw += x;
  for (const double x : r.rewards) total += x;
  const double samples = static_cast<double>(std::max<std::size_t>(r.rewards.size(), 1));
  std::size_t generated = 0, longest = 0;
  for (const auto& t : r.trajectories) {
    generated += t.tokens.size();
    longest = std::max(longest, t.tokens.size());
  }
  const double trajectories = static_cast<double>(std::max<std::size_t>(r.trajectories.size(), 1));
  json events = json::array();
  for (const auto& e : r.events) events.push_back({{"sequence", e.sequence}, {"step", e.step + 1}, {"event", e.what}});
  const auto& p = r.phase_seconds;
  json record{{"step", r.step + 1},
              {"train/loss", r.loss},
              {"train/kl_penalty", m.kl_penalty},
              {"train/token_mult_prob_error", ratio(m.mult_prob_error_sum, tokens)},
              {"train/gen_kl_error", ratio(m.gen_kl_error_sum, tokens)},
              {"train/sampling_importance_ratio", ratio(m.importance_weight_sum, tokens)},
              {"train/is_oob_ratio", oob},
              {"train/approx_entropy", ratio(m.approx_entropy_sum, tokens)},
              {"train/probs_ratio", ratio(m.ratio_sum, tokens)},
              {"train/probs_ratio_min", extremum(m.ratio_min)},
              {"train/probs_ratio_max", extremum(m.ratio_max)},
              {"train/probs_ratio_clamped", ratio(m.ratio_clamped_sum, tokens)},
              {"train/probs_ratio_clamped_min", extremum(m.ratio_clamped_min)},
              {"train/probs_ratio_clamped_max", extremum(m.ratio_clamped_max)},
              {"train/clipped_low_fraction", ratio(static_cast<double>(m.clipped_low), tokens)},
              {"train/clipped_high_fraction", ratio(static_cast<double>(m.clipped_high), tokens)},
              {"train/clipped_dual_fraction", ratio(static_cast<double>(m.clipped_dual), tokens)},
              {"train/grad_norm", r.grad_norm_mean},
              {"train/lr", r.optimizer.lr},
              {"train/reward", r.generated_reward_mean},
              {"train/filtered_reward", total / samples},
              {"train/dynamic_sampling_num_gen_batches", r.dynamic_sampling.num_gen_batches},
              {"train/dynamic_sampling_num_discarded_valid_samples", r.dynamic_sampling.num_discarded_valid_samples},
              {"train/raw_reward", raw / samples},
              {"train/mean_gen_tokens_per_sample", static_cast<double>(generated) / trajectories},
              {"train/max_gen_tokens_per_sample", longest},
              {"train/num_tokens", r.train_tokens},
              {"train/overlong_filtered_samples", r.filtered_samples},
              {"train/excluded_sampled_tokens", r.excluded_tokens},
              {"train/optimizer_steps", r.optimizer_steps},
              {"timing/train/generation", p.generation},
              {"timing/train/generation_tokens_per_sec", ratio(static_cast<double>(generated), p.generation)},
              {"timing/train/reward_calculation", p.scoring},
              {"timing/train/policy_and_reference_logprobs", p.logprobs},
              {"timing/train/policy_training", p.training},
              {"timing/train/prepare_for_generation/transfer_and_update_weights", p.refit},
              {"timing/train/waiting_for_generation", p.waiting},
              {"timing/train/total_step_time", seconds},
              {"generated_with", r.generated_with},
              {"trained_to", r.trained_to},
              {"trajectories", r.trajectories.size()},
              {"micro_batches", r.micro_batches},
              {"refit", refit_json(r.refit)},
              {"control_bytes", traffic_json(traffic)},
              {"weights_digests", digests_json(r)},
              {"events", events}};
  add_turn_metrics(record, "train", r.turns, s.plan);
  return record;
}

json sft_step_record(const step_report& r, const socket_thread::traffic_counts& traffic, double seconds,
                     const step_metric_settings& s) {
  const auto& p = r.phase_seconds;
  json record{{"step", r.step + 1},
              {"sft/loss", r.loss},
              {"sft/grad_norm", r.grad_norm_mean},
              {"sft/lr", r.optimizer.lr},
              {"sft/num_tokens", r.train_tokens},
              {"timing/sft/policy_training", p.logprobs + p.training},
              {"timing/sft/transfer_and_update_weights", p.refit},
              {"timing/sft/total_step_time", seconds},
              {"trained_to", r.trained_to},
              {"refit", refit_json(r.refit)},
              {"control_bytes", traffic_json(traffic)},
              {"weights_digests", digests_json(r)}};
  add_turn_metrics(record, "sft", r.turns, s.plan);
  return record;
}

void add_validation_metrics(json& record, const validation_report& v) {
  record["validation/accuracy"] = v.accuracy;
  record["validation/avg_length"] = v.avg_length;
  record["timing/validation/total"] = v.seconds;
}

json validation_record(const validation_report& v) {
  json record = json::object();
  record["step"] = v.step;
  add_validation_metrics(record, v);
  return record;
}

std::vector<records::tagged_scalar> scalars_of(const json& record) {
  std::vector<records::tagged_scalar> out;
  flatten(record, "", out);
  return out;
}

}  // namespace tandem
