// A step's line in its two forms (step_line.hpp).
#include "actors/controller/step_line.hpp"

#include <cstdio>

#include "actors/controller/step_metrics.hpp"

namespace tandem {
namespace {

double per_token(double sum, std::int64_t tokens) { return tokens > 0 ? sum / static_cast<double>(tokens) : 0.0; }

/// ", weights 0x... on every policy rank" (or "(ranks differ)"); empty when no rank offered one.
std::string digests_text(const step_report& r) {
  if (r.weights_digests.empty() || r.weights_digests.front() == 0) return "";
  bool same = true;
  for (const auto d : r.weights_digests) same = same && d == r.weights_digests.front();
  return ", weights " + digest_hex(r.weights_digests.front()) + (same ? " on every policy rank" : " (ranks differ)");
}

/// "; turns: optimizer state 0.54 GiB offloaded in 0.012 s (45.1 GB/s), restored in 0.011 s
/// (49.3 GB/s), host link 52 GB/s; KV cache freed in 0.002 s, made in 0.004 s; in use as training
/// ended 70.1 GiB (plan 68.5), as generation ended 21.4 GiB (plan 20.9)" for a colocated run;
/// empty otherwise. A transfer that did not run this step, memory not measured (the CPU's) or a
/// phase without a plan is left out.
std::string turns_text(const plain::device_turn_figures& t, const memory_plan_figures& plan) {
  if (t.empty()) return "";
  constexpr double gib = 1024.0 * 1024.0 * 1024.0;
  auto fmt = [](const char* f, auto... v) {
    char text[160];
    std::snprintf(text, sizeof text, f, v...);
    return std::string(text);
  };
  std::string moved;
  if (t.offloads > 0)
    moved += fmt("%.3g GiB offloaded in %.3g s (%.3g GB/s)", static_cast<double>(t.offloaded_bytes) / gib, t.offload_seconds,
                 t.offload_gb_per_s());
  if (t.restores > 0)
    moved += (moved.empty() ? fmt("%.3g GiB ", static_cast<double>(t.restored_bytes) / gib) : std::string(", ")) +
             fmt("restored in %.3g s (%.3g GB/s)", t.restore_seconds, t.restore_gb_per_s());
  std::string text = "; turns: ";
  if (!moved.empty()) text += "optimizer state " + moved + ", ";
  if (t.host_link_gb_per_s > 0) text += fmt("host link %.3g GB/s; ", t.host_link_gb_per_s);
  text += fmt("KV cache freed in %.3g s, made in %.3g s", t.cache_release_seconds, t.cache_restore_seconds);
  auto planned = [&](double bytes) { return bytes > 0 ? fmt(" (plan %.3g)", bytes / gib) : std::string(); };
  std::string in_use;
  if (t.training_in_use_bytes > 0)
    in_use += fmt(" as training ended %.3g GiB", static_cast<double>(t.training_in_use_bytes) / gib) + planned(plan.training_bytes);
  if (t.generation_in_use_bytes > 0)
    in_use += (in_use.empty() ? "" : ",") +
              fmt(" as generation ended %.3g GiB", static_cast<double>(t.generation_in_use_bytes) / gib) +
              planned(plan.generation_bytes);
  if (!in_use.empty()) text += "; in use" + in_use;
  return text;
}

}  // namespace

step_line format_step_line(const step_report& r, const step_line_facts& f) {
  if (r.supervised) return format_sft_step_line(r, f);
  const auto& m = r.metrics;
  const double loss = r.loss;  // the mean over the step's optimizer steps of each one's loss
  const double tmpe = per_token(m.mult_prob_error_sum, m.token_count);
  const double gen_kl = per_token(m.gen_kl_error_sum, m.token_count);
  const auto number = static_cast<long long>(f.number), steps = static_cast<long long>(f.steps);
  const auto tokens = static_cast<long long>(r.train_tokens);
  const auto from = static_cast<unsigned long long>(r.generated_with), to = static_cast<unsigned long long>(r.trained_to);
  step_line line;
  char text[512];
  std::snprintf(text, sizeof text, "step %lld/%lld  reward %.3f  loss %.4f  tmpe %.4f  gen_kl %.1e  %lld tok  %.2f s  v%llu->v%llu",
                number, steps, r.reward_mean, loss, tmpe, gen_kl, tokens, f.seconds, from, to);
  line.compact = text;
  std::snprintf(text, sizeof text,
                "step %lld/%lld: reward %.3f, loss %.4f, tmpe %.4f, gen_kl %.1e, %lld tokens, v%llu -> v%llu live (%s refit, "
                "%zu buckets, %lld bytes), control %llu bytes, %.2f s",
                number, steps, r.reward_mean, loss, tmpe, gen_kl, tokens, from, to, to_string(r.refit.mode).c_str(),
                r.refit.buckets, static_cast<long long>(r.refit.bytes),
                static_cast<unsigned long long>(f.traffic.sent_bytes + f.traffic.received_bytes), f.seconds);
  line.full = text + digests_text(r) + turns_text(r.turns, f.plan);
  return line;
}

step_line format_sft_step_line(const step_report& r, const step_line_facts& f) {
  const auto number = static_cast<long long>(f.number), steps = static_cast<long long>(f.steps);
  const auto tokens = static_cast<long long>(r.train_tokens);
  const auto from = static_cast<unsigned long long>(r.generated_with), to = static_cast<unsigned long long>(r.trained_to);
  step_line line;
  char text[512];
  std::snprintf(text, sizeof text, "warm-up %lld/%lld  loss %.4f  grad_norm %.3f  %lld tok  %.2f s  v%llu->v%llu", number,
                steps, r.loss, r.grad_norm_mean, tokens, f.seconds, from, to);
  line.compact = text;
  std::snprintf(text, sizeof text,
                "warm-up %lld/%lld: loss %.4f, grad_norm %.3f, %lld tokens, v%llu -> v%llu live (%s refit, %zu buckets, "
                "%lld bytes), control %llu bytes, %.2f s",
                number, steps, r.loss, r.grad_norm_mean, tokens, from, to, to_string(r.refit.mode).c_str(), r.refit.buckets,
                static_cast<long long>(r.refit.bytes),
                static_cast<unsigned long long>(f.traffic.sent_bytes + f.traffic.received_bytes), f.seconds);
  line.full = text + digests_text(r) + turns_text(r.turns, f.plan);
  return line;
}

}  // namespace tandem
