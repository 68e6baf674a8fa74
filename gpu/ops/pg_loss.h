// The clipped policy-gradient loss of GRPO/DAPO (NeMo-RL's ClippedPGLossFn; formulas in
// DESIGN.md section 9) over packed sequences, as an op: the scalar
// loss of one micro-batch, its gradient with respect to the current logprobs, and metrics as sums
// that reduce over micro-batches and data-parallel ranks.
//
// Per masked token (m = 1), with x = lp_cur, "sg" = stop-gradient:
//   r      = exp(x - lp_prev)                         (force_on_policy_ratio: exp(x - sg(x)) = 1)
//   r_clip = clamp(r, 1 - ratio_clip_min, 1 + ratio_clip_max)   (force_on_policy_ratio: r)
//   l      = max(-A r, -A r_clip)
//   dual:    where A < 0, l = min(l, -A c)            (ratio_clip_c = c > 1)
//   w      = importance weight, no gradient (importance_correction below; 1 when off)
//   kl     = f * clamp(k3(clamp(lp_ref - x, ±kl_input_clamp)), ±kl_output_clamp),
//            k3(u) = exp(u) - 1 - u;  f = exp(x - sg(x)) (value 1, gradient 1), or with
//            use_on_policy_kl_approximation f = exp(x - lp_gen) (non-finite -> 0), no gradient
//            through f unless kl_on_policy_weight_grad
// Token-level:    loss = sum_t m w l / N_tok  +  beta * sum_t m kl / N_tok
// Sequence-level: loss = sum_s [sum_{t in s} m w l / n_s] / N_seq + beta * sum_s [sum_{t in s} m kl / n_s] / N_seq
// with n_s the masked tokens of sequence s (sequences without any contribute 0) and N_tok / N_seq
// the GLOBAL counts (all micro-batches, all data-parallel ranks), so micro-batch losses sum to the
// global loss. NeMo-RL divides by (N + 1e-8); we divide by N (relative difference <= 1e-8).
//
// Gradient conventions (torch semantics, used by the backward):
//   the clipped branch wins only when strictly larger (-A r_clip > -A r): its gradient is 0, and
//   that happens exactly for A < 0, r < 1 - ratio_clip_min ("low") or A > 0, r > 1 + ratio_clip_max
//   ("high"); the dual branch wins only when -A c < l strictly ("dual"), gradient 0; at an exact
//   tie torch.min would halve the gradient, we keep the unclipped one (a measure-zero case). The
//   KL clamps pass the gradient at equality and stop it strictly outside.
// Masked tokens (m = 0) are never read for the loss, gradient or metrics: any value is allowed there.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>

#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"
#include "gpu/core/tensor.h"
#include "plain/training.h"

namespace tandem::gpu::ops {

/// Train-vs-inference importance weight w of each token, from raw = exp(lp_prev - lp_gen) (a
/// non-finite raw becomes 0, as torch.nan_to_num). NeMo-RL keys in comments.
enum class importance_correction {
  off,           ///< use_importance_sampling_correction false: w = 1 (metrics still see raw)
  plain,         ///< on, no truncation: w = raw
  tis,           ///< "tis": w = clamp(raw, is_ratio_min, is_ratio_max)
  icepop,        ///< "icepop": w = raw if is_ratio_min <= raw <= is_ratio_max else 0
  seq_mask_tis,  ///< "seq-mask-tis": w = raw, or 0 for the whole sequence when its geometric-mean
                 ///< ratio exp(mean over masked tokens of nan_to_num(lp_prev - lp_gen)), computed in
                 ///< double, lies outside [is_ratio_min, is_ratio_max]
};

/// Loss configuration (NeMo-RL loss_fn keys in comments). Defaults: the Gemma 4 DAPO recipe, KL off.
struct pg_loss_settings {
  double ratio_clip_min = 0.2;                 ///< ratio_clip_min, in [0, 1]
  double ratio_clip_max = 0.28;                ///< ratio_clip_max (clip-higher), >= 0
  std::optional<double> ratio_clip_c = 10.0;   ///< ratio_clip_c: dual clip, > 1; nullopt disables
  importance_correction importance = importance_correction::tis;  ///< use_importance_sampling_correction + type
  double is_ratio_min = 0.0;                   ///< truncated_importance_sampling_ratio_min (tis: 0 if unset)
  double is_ratio_max = 2.0;                   ///< truncated_importance_sampling_ratio
  double kl_beta = 0.0;                        ///< reference_policy_kl_penalty; > 0 needs lp_ref
  double kl_input_clamp = 20.0;                ///< kl_input_clamp_value (> 0; infinity: none)
  double kl_output_clamp = 10.0;               ///< kl_output_clamp_value (> 0; infinity: none)
  bool use_on_policy_kl_approximation = false; ///< f = exp(lp_cur - lp_gen) instead of exp(x - sg(x))
  /// Let the gradient flow through f = exp(lp_cur - lp_gen) too (NeMo-RL after it adopted the
  /// score-function form; earlier versions detached it). false: f is a constant weight.
  bool kl_on_policy_weight_grad = false;
  bool token_level_loss = true;                ///< token_level_loss: false averages per sequence
  bool force_on_policy_ratio = false;          ///< force_on_policy_ratio: lp_prev := sg(lp_cur), r = 1
};

/// One micro-batch of packed sequences; every per-token tensor is [tokens] of one float dtype
/// (F32, or F64 for the reference), already in the next-token frame (the caller has shifted).
struct pg_loss_inputs {
  tensor lp_cur;       ///< F32|F64 [tokens]: current trainer logprobs (the differentiable input)
  tensor lp_prev;      ///< F32|F64 [tokens]: logprobs before the update; may be empty with force_on_policy_ratio
  tensor lp_gen;       ///< F32|F64 [tokens]: generator (inference engine) logprobs
  tensor advantages;   ///< F32|F64 [tokens]: A per token
  tensor mask;         ///< F32|F64 [tokens]: token_loss_mask * sample_mask, each value 0 or 1
  tensor lp_ref;       ///< F32|F64 [tokens]: reference-policy logprobs; required iff kl_beta > 0
  tensor seq_offsets;  ///< I32 [seqs + 1]: 0 = o[0] <= o[1] <= ... <= o[seqs] = tokens
  double global_token_count = 0;     ///< N_tok: masked tokens of the global batch (token-level loss)
  double global_sequence_count = 0;  ///< N_seq: valid sequences of the global batch (sequence-level loss)
};

/// Metrics of one micro-batch, computed in double over masked tokens only. Counts and sums add
/// across micro-batches and ranks (merge); extrema take min / max. Divide by the global counts
/// for NeMo-RL's means: probs_ratio = ratio_sum / N_tok, token_mult_prob_error =
/// mult_prob_error_sum / N_tok, gen_kl_error = gen_kl_error_sum / N_tok, sampling_importance_ratio
/// = importance_weight_sum / N_tok, approx_entropy = approx_entropy_sum / N_tok, is_oob_ratio =
/// is_truncated_tokens / N_tok (tis, icepop) or is_masked_sequences / N_seq (seq-mask-tis).
/// The metrics, each defined beside its field, and their merge: one definition for every layer (plain/training.h).
using plain::pg_loss_metrics;

/// loss [1] (lp_cur's dtype) = this micro-batch's share of the global loss (written); metrics,
/// unless null, are overwritten with this micro-batch's. On failure outputs are unspecified and
/// inputs untouched.
status pg_loss_forward(const exec_context& ctx, const pg_loss_inputs& in, const pg_loss_settings& settings, const tensor& loss,
                       pg_loss_metrics* metrics = nullptr);

/// d_lp_cur [tokens] (lp_cur's dtype) = dloss * d loss / d lp_cur, 0 at masked tokens; with
/// `accumulate`, added instead. dloss is the incoming gradient of the scalar loss (usually 1, or
/// the data-parallel scaling). On failure d_lp_cur is unspecified and inputs untouched.
status pg_loss_backward(const exec_context& ctx, const pg_loss_inputs& in, const pg_loss_settings& settings, double dloss,
                        const tensor& d_lp_cur, bool accumulate = false);

}  // namespace tandem::gpu::ops
