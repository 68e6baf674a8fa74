// The train_engine contract's default step: micro-batches, then the optimizer.
#include "gpu/engine/train_engine.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "gpu/ops/op_check.h"

namespace tandem::gpu {
namespace {

tensor view_of(const std::vector<float>& v) {
  return v.empty() ? tensor{} : tensor(const_cast<float*>(v.data()), dtype::float32, {static_cast<std::int64_t>(v.size())});
}

status bad(const char* who, const std::string& what) { return {status_code::invalid_argument, std::string(who) + ": " + what}; }

bool state_dtype(dtype t) { return t == dtype::float32 || t == dtype::bfloat16; }

}  // namespace

status check_train_engine_options(const char* who, const train_engine_options& o) {
  const ops::adamw_hyper& a = o.adamw;
  if (!(std::isfinite(a.lr) && a.lr >= 0)) return bad(who, "lr must be finite and >= 0, got " + ops::number(a.lr));
  if (!(a.beta1 >= 0 && a.beta1 < 1)) return bad(who, "beta1 must lie in [0, 1), got " + ops::number(a.beta1));
  if (!(a.beta2 >= 0 && a.beta2 < 1)) return bad(who, "beta2 must lie in [0, 1), got " + ops::number(a.beta2));
  if (!(std::isfinite(a.eps) && a.eps >= 0)) return bad(who, "eps must be finite and >= 0, got " + ops::number(a.eps));
  if (!(std::isfinite(a.weight_decay) && a.weight_decay >= 0))
    return bad(who, "weight_decay must be finite and >= 0, got " + ops::number(a.weight_decay));
  if (!(o.warmup_start_factor > 0 && o.warmup_start_factor <= 1))
    return bad(who, "warmup_start_factor must lie in (0, 1], got " + ops::number(o.warmup_start_factor));
  if (o.warmup_steps < 0) return bad(who, "warmup_steps must be >= 0, got " + std::to_string(o.warmup_steps));
  if (!(std::isfinite(o.max_grad_norm) && o.max_grad_norm >= 0))
    return bad(who, "max_grad_norm must be finite and >= 0 (0: no clipping), got " + ops::number(o.max_grad_norm));
  if (o.logprob_chunk_rows <= 0) return bad(who, "logprob_chunk_rows must be > 0, got " + std::to_string(o.logprob_chunk_rows));
  if (!state_dtype(o.master_dtype)) return bad(who, "master_dtype must be float32 or bfloat16, got " + std::string(to_string(o.master_dtype)));
  if (!state_dtype(o.first_moment_dtype))
    return bad(who, "first_moment_dtype must be float32 or bfloat16, got " + std::string(to_string(o.first_moment_dtype)));
  if (!state_dtype(o.second_moment_dtype))
    return bad(who, "second_moment_dtype must be float32 or bfloat16, got " + std::string(to_string(o.second_moment_dtype)));
  return status::ok();
}

double scheduled_lr(const train_engine_options& o, std::int64_t step) {
  if (o.warmup_steps <= 0) return o.adamw.lr;
  const double progress = static_cast<double>(std::min(step, o.warmup_steps)) / static_cast<double>(o.warmup_steps);
  return o.adamw.lr * (o.warmup_start_factor + (1.0 - o.warmup_start_factor) * progress);
}

status check_micro_batch_sizes(const char* op, const train_micro_batch_data& mb, const ops::pg_loss_settings& loss) {
  const std::size_t n = mb.sequences.tokens.size();
  const auto sized = [n](const std::vector<float>& v) { return v.size() == n; };
  const bool prev_ok = sized(mb.lp_prev) || (loss.force_on_policy_ratio && mb.lp_prev.empty());
  if (sized(mb.advantages) && sized(mb.mask) && sized(mb.lp_gen) && prev_ok && (mb.lp_ref.empty() || sized(mb.lp_ref)))
    return status::ok();
  return {status_code::invalid_argument, std::string(op) + ": train_micro_batch: advantages, mask, lp_prev, lp_gen (and lp_ref "
                                         "when given) must hold one value per token (" + std::to_string(n) + ")"};
}

ops::pg_loss_inputs pg_loss_inputs_of(const train_micro_batch_data& mb, const std::vector<float>& lp_cur,
                                      const global_counts& counts) {
  ops::pg_loss_inputs in;
  in.lp_cur = view_of(lp_cur);
  in.lp_prev = view_of(mb.lp_prev);
  in.lp_gen = view_of(mb.lp_gen);
  in.advantages = view_of(mb.advantages);
  in.mask = view_of(mb.mask);
  in.lp_ref = view_of(mb.lp_ref);
  in.seq_offsets = tensor(const_cast<std::int32_t*>(mb.sequences.offsets.data()), dtype::int32,
                          {static_cast<std::int64_t>(mb.sequences.offsets.size())});
  in.global_token_count = static_cast<double>(counts.tokens);
  in.global_sequence_count = static_cast<double>(counts.sequences);
  return in;
}

result<train_step_result> train_engine::train_step(const std::vector<train_micro_batch_data>& micro_batches,
                                                   const ops::pg_loss_settings& loss, const global_counts& counts,
                                                   const ops::sampling_params& params) {
  train_step_result out;
  for (std::size_t i = 0; i < micro_batches.size(); ++i) {
    auto m = train_micro_batch(micro_batches[i], loss, counts, params);
    if (!m) {
      abandon_step();
      return status{m.error().code(), "micro-batch " + std::to_string(i) + ": " + m.error().message()};
    }
    if (i == 0) out.metrics = m.value();
    else out.metrics.merge(m.value());
  }
  auto opt = optimizer_step();
  if (!opt) return status{opt.error().code(), "optimizer step: " + opt.error().message()};
  out.optimizer = opt.value();
  return out;
}

result<train_engine::supervised_step_result> train_engine::train_supervised_step(
    const std::vector<supervised_micro_batch>& micro_batches, std::int64_t global_tokens) {
  supervised_step_result out;
  for (std::size_t i = 0; i < micro_batches.size(); ++i) {
    auto l = train_cross_entropy(micro_batches[i].sequences, micro_batches[i].mask, global_tokens);
    if (!l) {
      abandon_step();
      return status{l.error().code(), "micro-batch " + std::to_string(i) + ": " + l.error().message()};
    }
    out.loss += l.value();
  }
  auto opt = optimizer_step();
  if (!opt) return status{opt.error().code(), "optimizer step: " + opt.error().message()};
  out.optimizer = opt.value();
  return out;
}

status check_learning_rate(const char* who, double lr) {
  if (std::isfinite(lr) && lr >= 0) return status::ok();
  return bad(who, "set_learning_rate: lr must be finite and >= 0, got " + ops::number(lr));
}

}  // namespace tandem::gpu
