// What a policy rank is asked and what it answers, step by step: one definition for the train
// engines (gpu/engine/train_engine.h, gpu/ops/pg_loss.h), the policy workers' messages and the
// control plane. Only per-sequence values travel: the rank keeps each step's per-token data
// (actors/policy_worker/step_batch.hpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "plain/fields.h"
#include "plain/sampling.h"
#include "plain/sequences.h"

namespace tandem::plain {

/// The masked-token counts of a whole global batch (every rank), which normalise its loss.
struct global_counts {
  static constexpr const char* type_name = "global_counts";
  std::int64_t tokens = 0;     ///< masked tokens
  std::int64_t sequences = 0;  ///< sequences with at least one masked token
  bool operator==(const global_counts&) const = default;

  template <class F>
  static decltype(auto) fields(F&& f, global_counts& x) {
    return f(named("tokens", x.tokens), named("sequences", x.sequences));
  }
};

/// What one optimizer step did.
struct optimizer_result {
  static constexpr const char* type_name = "optimizer_result";
  double grad_norm = 0;   ///< global L2 norm before clipping
  double lr = 0;          ///< learning rate used
  std::int64_t step = 0;  ///< optimizer steps taken so far, this one included
  bool operator==(const optimizer_result&) const = default;

  template <class F>
  static decltype(auto) fields(F&& f, optimizer_result& x) {
    return f(named("grad_norm", x.grad_norm), named("lr", x.lr), named("step", x.step));
  }
};

/// The policy-gradient loss's metrics over some masked tokens (gpu/ops/pg_loss.h defines each).
struct pg_loss_metrics {
  static constexpr const char* type_name = "pg_loss_metrics";
  double pg_loss = 0;     ///< the policy-gradient term's share of the loss (normalised like the loss)
  double kl_penalty = 0;  ///< the KL term's share divided by beta (0 when beta = 0); loss = pg_loss + beta * kl_penalty
  std::int64_t token_count = 0;     ///< masked tokens
  std::int64_t sequence_count = 0;  ///< sequences with at least one masked token
  std::int64_t clipped_low = 0;     ///< tokens where the low clip is active (A < 0, r < 1 - ratio_clip_min)
  std::int64_t clipped_high = 0;    ///< tokens where the high clip is active (A > 0, r > 1 + ratio_clip_max)
  std::int64_t clipped_dual = 0;    ///< tokens where the dual clip is active (A < 0, -A c < l)
  std::int64_t is_truncated_tokens = 0;  ///< tokens whose w differs from raw: tis clamped, icepop or seq-mask-tis zeroed
  std::int64_t is_masked_sequences = 0;  ///< seq-mask-tis: sequences (with masked tokens) zeroed
  double ratio_sum = 0;          ///< sum of r
  double ratio_min = std::numeric_limits<double>::infinity();
  double ratio_max = -std::numeric_limits<double>::infinity();
  double ratio_clamped_sum = 0;  ///< sum of r_clip
  double ratio_clamped_min = std::numeric_limits<double>::infinity();
  double ratio_clamped_max = -std::numeric_limits<double>::infinity();
  double importance_weight_sum = 0;  ///< sum of w after truncation (raw when the correction is off or plain)
  double mult_prob_error_sum = 0;    ///< sum of exp(|lp_gen - lp_prev|)
  double gen_kl_error_sum = 0;       ///< sum of k3: exp(lp_prev - lp_gen) - 1 - (lp_prev - lp_gen), unclamped
  double approx_entropy_sum = 0;     ///< sum of -exp(lp_cur - lp_gen) * lp_cur
  bool operator==(const pg_loss_metrics&) const = default;

  /// Folds in another micro-batch's or rank's metrics: sums and counts add, extrema combine.
  void merge(const pg_loss_metrics& o);

  template <class F>
  static decltype(auto) fields(F&& f, pg_loss_metrics& x) {
    return f(named("pg_loss", x.pg_loss), named("kl_penalty", x.kl_penalty), named("token_count", x.token_count),
             named("sequence_count", x.sequence_count), named("clipped_low", x.clipped_low),
             named("clipped_high", x.clipped_high), named("clipped_dual", x.clipped_dual),
             named("is_truncated_tokens", x.is_truncated_tokens), named("is_masked_sequences", x.is_masked_sequences),
             named("ratio_sum", x.ratio_sum), named("ratio_min", x.ratio_min), named("ratio_max", x.ratio_max),
             named("ratio_clamped_sum", x.ratio_clamped_sum), named("ratio_clamped_min", x.ratio_clamped_min),
             named("ratio_clamped_max", x.ratio_clamped_max), named("importance_weight_sum", x.importance_weight_sum),
             named("mult_prob_error_sum", x.mult_prob_error_sum), named("gen_kl_error_sum", x.gen_kl_error_sum),
             named("approx_entropy_sum", x.approx_entropy_sum));
  }
};

namespace detail {
/// One field of pg_loss_metrics::merge: the *_min fields take the minimum, the *_max fields the
/// maximum, every other field adds.
template <class T>
void fold_metric(std::string_view name, T& mine, const T& theirs) {
  if (name.ends_with("_min")) mine = std::min(mine, theirs);
  else if (name.ends_with("_max")) mine = std::max(mine, theirs);
  else mine += theirs;
}
}  // namespace detail

inline void pg_loss_metrics::merge(const pg_loss_metrics& o) {
  auto& other = const_cast<pg_loss_metrics&>(o);  // only read: the list takes non-const members
  fields(
      [&](auto... mine) {
        fields([&](auto... theirs) { (detail::fold_metric(mine.name, mine.value, std::as_const(theirs.value)), ...); }, other);
      },
      *this);
}

/// A policy rank's share of a step's trajectories for the logprob pass. The rank keeps the
/// sequences, lp_gen and the logprobs it computes (lp_prev, and lp_ref with `reference`) for the
/// step's train job, so per-token data travels to a rank once and never back.
struct logprobs_job {
  static constexpr const char* type_name = "logprobs_job";
  std::uint32_t step = 0;                      ///< the RL step; the train job names it again
  std::uint64_t version = 0;                   ///< must be the rank's current version (else stale_version)
  packed_sequences sequences;                  ///< prompt + generated tokens of each trajectory
  std::vector<std::int32_t> prompt_tokens;     ///< per sequence: its prompt's length, >= 1
  std::vector<float> lp_gen;                   ///< per generated token, sequence after sequence: the generator's logprob
  std::vector<std::uint64_t> generated_with;   ///< per sequence: the version that generated it
  sampling_params sampling;                    ///< the sampler's temperature and masks
  bool reference = false;                      ///< also the frozen reference policy's logprobs (the KL term)
  bool operator==(const logprobs_job&) const = default;

  template <class F>
  static decltype(auto) fields(F&& f, logprobs_job& x) {
    return f(named("step", x.step), named("version", x.version), named("sequences", x.sequences),
             named("prompt_tokens", x.prompt_tokens), named("lp_gen", x.lp_gen),
             named("generated_with", x.generated_with), named("sampling", x.sampling), named("reference", x.reference));
  }
};

struct logprobs_result {
  static constexpr const char* type_name = "logprobs_result";
  std::string worker;           ///< the policy rank that answered
  std::uint64_t version = 0;    ///< the weights that computed lp_prev
  /// Per sequence: generated tokens whose lp_prev is -inf (the trainer's top-k / top-p masks
  /// exclude a token the generator sampled). They leave the loss; the driver counts them.
  std::vector<std::int32_t> excluded_tokens;
  std::int64_t tokens = 0;      ///< tokens scored (prompt and generated)
  bool operator==(const logprobs_result&) const = default;

  template <class F>
  static decltype(auto) fields(F&& f, logprobs_result& x) {
    return f(named("worker", x.worker), named("version", x.version), named("excluded_tokens", x.excluded_tokens),
             named("tokens", x.tokens));
  }
};

/// One optimizer step's part of a train job: the next `sequences` of the rank's logprobs job,
/// and the masked-token counts of the whole global batch (every rank) that normalise its loss.
struct optimizer_share {
  static constexpr const char* type_name = "optimizer_share";
  std::uint64_t sequences = 0;
  global_counts counts;
  bool operator==(const optimizer_share&) const = default;

  template <class F>
  static decltype(auto) fields(F&& f, optimizer_share& x) {
    return f(named("sequences", x.sequences), named("counts", x.counts));
  }
};

/// What a train job minimises. The values are wire codes.
///   policy_gradient: the recipe's clipped policy-gradient loss (the RL phase), with the job's
///                    advantages;
///   cross_entropy:   next-token cross-entropy of each sequence's generated part (its target), the
///                    supervised warm-up; advantages are ignored, the loss multipliers still apply.
enum class train_objective : std::uint8_t { policy_gradient = 0, cross_entropy = 1 };

constexpr bool known(train_objective o) {
  return o == train_objective::policy_gradient || o == train_objective::cross_entropy;
}

/// One train step on the sequences of the rank's last logprobs job: for each optimizer step in
/// order, its micro-batches (cut by token budget) and the optimizer step. The loss settings are
/// not in it: every rank derives them from the recipe.
struct train_job {
  static constexpr const char* type_name = "train_job";
  std::uint32_t step = 0;                ///< the logprobs job's step; refused (wrong_state) otherwise
  std::uint64_t version = 0;             ///< the weights lp_prev came from; refused (stale_version) unless current
  std::vector<double> advantages;        ///< per sequence of the logprobs job
  std::vector<double> loss_multipliers;  ///< per sequence: 0 leaves it out of the loss (1 otherwise)
  std::vector<optimizer_share> optimizer_steps;  ///< >= 1; their sequences add up to the job's
  std::int64_t micro_batch_tokens = 1024;        ///< token budget of a micro-batch, > 0
  sampling_params sampling;              ///< the distribution the logprobs are taken under
  train_objective objective = train_objective::policy_gradient;  ///< the rank takes each one's learning rate from the recipe
  bool operator==(const train_job&) const = default;

  template <class F>
  static decltype(auto) fields(F&& f, train_job& x) {
    return f(named("step", x.step), named("version", x.version), named("advantages", x.advantages),
             named("loss_multipliers", x.loss_multipliers), named("optimizer_steps", x.optimizer_steps),
             named("micro_batch_tokens", x.micro_batch_tokens), named("sampling", x.sampling),
             named("objective", x.objective));
  }
};

/// A colocated member's turns of its device between training and generation since its last train
/// report (actors/runtime/device_turns.hpp): what moved, how long it took, and the device memory
/// in use as each turn ended. All zero on a member that hosts one engine.
struct device_turn_figures {
  static constexpr const char* type_name = "device_turn_figures";
  std::uint64_t offloads = 0;             ///< optimizer-state offloads (to pinned host memory) and restores
  std::uint64_t restores = 0;
  std::uint64_t offloaded_bytes = 0;
  std::uint64_t restored_bytes = 0;
  double offload_seconds = 0;
  double restore_seconds = 0;
  double cache_release_seconds = 0;       ///< the generator's KV cache freed for training, and made again
  double cache_restore_seconds = 0;
  std::uint64_t training_in_use_bytes = 0;    ///< device memory in use as the last training turn ended (0: the CPU)
  std::uint64_t generation_in_use_bytes = 0;  ///< ... and as the last generation turn ended
  double host_link_gb_per_s = 0;          ///< pinned host memory to the device, measured as the member started
  bool operator==(const device_turn_figures&) const = default;
  /// No turn was taken (a member that hosts one engine): every figure zero.
  bool empty() const { return *this == device_turn_figures{}; }
  /// 1e9 bytes a second of the offloads and of the restores (0 when none ran).
  double offload_gb_per_s() const { return offload_seconds > 0 ? static_cast<double>(offloaded_bytes) / 1e9 / offload_seconds : 0.0; }
  double restore_gb_per_s() const { return restore_seconds > 0 ? static_cast<double>(restored_bytes) / 1e9 / restore_seconds : 0.0; }
  /// Another rank's figures into these: every rank's counts and bytes, the slowest rank's seconds,
  /// the most memory in use, the slowest host link that was measured.
  void merge(const device_turn_figures& o);

  template <class F>
  static decltype(auto) fields(F&& f, device_turn_figures& x) {
    return f(named("offloads", x.offloads), named("restores", x.restores), named("offloaded_bytes", x.offloaded_bytes),
             named("restored_bytes", x.restored_bytes), named("offload_seconds", x.offload_seconds),
             named("restore_seconds", x.restore_seconds), named("cache_release_seconds", x.cache_release_seconds),
             named("cache_restore_seconds", x.cache_restore_seconds), named("training_in_use_bytes", x.training_in_use_bytes),
             named("generation_in_use_bytes", x.generation_in_use_bytes), named("host_link_gb_per_s", x.host_link_gb_per_s));
  }
};

inline void device_turn_figures::merge(const device_turn_figures& o) {
  offloads += o.offloads;
  restores += o.restores;
  offloaded_bytes += o.offloaded_bytes;
  restored_bytes += o.restored_bytes;
  offload_seconds = std::max(offload_seconds, o.offload_seconds);
  restore_seconds = std::max(restore_seconds, o.restore_seconds);
  cache_release_seconds = std::max(cache_release_seconds, o.cache_release_seconds);
  cache_restore_seconds = std::max(cache_restore_seconds, o.cache_restore_seconds);
  training_in_use_bytes = std::max(training_in_use_bytes, o.training_in_use_bytes);
  generation_in_use_bytes = std::max(generation_in_use_bytes, o.generation_in_use_bytes);
  if (o.host_link_gb_per_s > 0 && (host_link_gb_per_s == 0 || o.host_link_gb_per_s < host_link_gb_per_s))
    host_link_gb_per_s = o.host_link_gb_per_s;
}

struct train_report {
  static constexpr const char* type_name = "train_report";
  std::string worker;                ///< the policy rank that answered
  std::uint64_t version = 0;         ///< after the step (the job's version + 1)
  std::uint64_t micro_batches = 0;
  std::uint64_t optimizer_steps = 0;
  pg_loss_metrics metrics;           ///< merged over this rank's micro-batches of every optimizer step
  double loss = 0;                   ///< sum over the optimizer steps of this rank's share of each step's loss
  optimizer_result optimizer;        ///< the last optimizer step's
  double grad_norm_sum = 0;          ///< over the optimizer steps (their mean is the step's grad_norm)
  std::uint64_t weights_digest = 0;  ///< a hash of the weights after the step; 0: the engine offers none
  device_turn_figures turns;         ///< a colocated member's device turns since its last report
  bool operator==(const train_report&) const = default;

  template <class F>
  static decltype(auto) fields(F&& f, train_report& x) {
    return f(named("worker", x.worker), named("version", x.version), named("micro_batches", x.micro_batches),
             named("optimizer_steps", x.optimizer_steps), named("metrics", x.metrics), named("loss", x.loss),
             named("optimizer", x.optimizer), named("grad_norm_sum", x.grad_norm_sum),
             named("weights_digest", x.weights_digest), named("turns", x.turns));
  }
};

}  // namespace tandem::plain
