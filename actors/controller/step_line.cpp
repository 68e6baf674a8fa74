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
  line.full = text + digests_text(r);
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
  line.full = text + digests_text(r);
  return line;
}

}  // namespace tandem
