// Scoring: the logprob of given target tokens under the sampler's distribution (temperature, top-k,
// top-p; DESIGN.md section 3), optionally that distribution's entropy, and the backward to the
// logits. The one definition of the distribution is `sampling_params`' comment below; the sampler
// (sampling.h) draws from exactly it, through the same code, so its logprobs match these bitwise.
#pragma once

#include <cstdint>
#include <string_view>

#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"
#include "gpu/core/tensor.h"
#include "plain/sampling.h"

namespace tandem::gpu::ops {

/// How one row of logits x[0..V) (as the model returns them, already softcapped) becomes the
/// distribution that tokens are sampled from and scored under. vLLM's order: temperature, then
/// top-k, then top-p on the top-k-renormalised softmax (DESIGN.md section 9).
///  1. Ranking: token a ranks before token b iff x_a > x_b, or x_a == x_b and a < b (ties go to
///     the lower id). The ranking is that of x / T for every T > 0, so it ignores the temperature.
///  2. Temperature: d_j = (x_j - x_max) / T and e_j = exp(d_j), in double, x_max being the row's
///     largest logit; the softmax of x / T is e_j / sum e.
///  3. Top-k (0 < top_k < V): K = the top_k first-ranked tokens, exactly top_k even when logits
///     tie at the boundary (vLLM keeps every tie there; only exactly equal logits differ).
///     Otherwise K = every token.
///  4. Top-p (top_p < 1): with S_K = sum_{j in K} e_j, walk K in ranking order, summing e_j, and
///     keep a token iff the sum over the tokens kept before it is < top_p * S_K. So P is the
///     shortest ranking prefix of K whose probability reaches top_p, boundary inclusive: once the
///     kept mass equals top_p exactly, nothing more is kept (probabilities 0.5, 0.25, 0.125,
///     0.125 with top_p = 0.75 keep 2 tokens). P always holds the first-ranked token. This is
///     vLLM's rule (drop a token when the mass ranked above it is >= top_p) up to rounding.
///     Otherwise (top_p == 1) P = K.
///  5. logprob_j = d_j - log(S), S = sum_{j in P} e_j, for j in P; -infinity outside P.
/// S_K and S are summed over ascending token ids, the top-p prefix in ranking order, all in
/// double; the logprob is rounded to the logits' dtype at the end.
/// temperature: T > 0 (the sampler also takes 0, greedy: see sampling.h); top_k >= 0 (0 or >= V:
/// no top-k); top_p in (0, 1] (1: no top-p). One definition for every layer (plain/sampling.h).
using sampling_params = plain::sampling_params;

/// ok, or invalid_argument "<op>: temperature must be > 0, got 0" (with `greedy_allowed`:
/// "<op>: temperature must be >= 0 (0: greedy), got -1"), "<op>: top_k must be >= 0 (0: no
/// top-k), got -2" or "<op>: top_p must be in (0, 1], got 1.5"; non-finite values are refused.
status check_sampling_params(std::string_view op, const sampling_params& params, bool greedy_allowed);

/// logprobs[r] = logprob of targets[r] in row r of `logits` under `params` (sampling_params' steps
/// 1-5), -infinity when top-k/top-p masks the target out (the trainer only scores sampled
/// tokens, which the masks always keep). With a non-empty `entropy`, also the entropy of row r's
/// filtered distribution, H_r = -sum_{j in P} p_j log p_j (0 when P holds one token).
/// Rows are independent: the caller feeds a long packed sequence as blocks of rows, and each row
/// needs no scratch without top-k/top-p (max, then a sum of exponentials) and V int32 indices per
/// thread with them. Temperature must be > 0. Refuses a target outside [0, V) and a non-finite
/// logit. On failure, outputs are unspecified and inputs untouched.
///   logits   F32|F64 [rows, V] (CUDA: F32|BF16)
///   targets  I32 [rows]
///   logprobs logits' dtype [rows], or F32 with BF16 logits
///   entropy  logprobs' dtype [rows], or empty
/// On CUDA the checks that need the logits' or targets' values are not made (they would cost a
/// stream synchronisation): a target outside [0, V) or a non-finite logit gives NaN for its row.
status logprobs_forward(const exec_context& ctx, const tensor& logits, const tensor& targets, const sampling_params& params,
                        const tensor& logprobs, const tensor& entropy = {});

/// The gradient of sum_r dlogprobs[r] * logprobs[r] with respect to the logits, the top-k/top-p
/// masks held fixed: dlogits[r, j] = (onehot(targets[r])_j - p_rj) * dlogprobs[r] / T for j in P_r
/// (p_rj = e_j / S), 0 outside P_r; a row whose target is masked out (logprob -infinity) gets 0.
/// Written, or added to dlogits with `accumulate` (logits may have other consumers).
/// Same checks as logprobs_forward. On failure, dlogits is unspecified and inputs untouched.
///   logits    F32|F64 [rows, V] (CUDA: F32|BF16)
///   targets   I32 [rows]
///   dlogprobs logits' dtype [rows], or F32 with BF16 logits
///   dlogits   logits' dtype [rows, V]
status logprobs_backward(const exec_context& ctx, const tensor& logits, const tensor& targets, const sampling_params& params,
                         const tensor& dlogprobs, const tensor& dlogits, bool accumulate = false);

}  // namespace tandem::gpu::ops
