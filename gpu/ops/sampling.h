// Sampling: one token per row of logits from the distribution of sampling_params (logprobs.h),
// drawn with counter-based randomness (philox.h) so that the draw is a pure function of the
// row's coordinates, and returned with its logprob, bitwise equal to logprobs_forward's score of it.
#pragma once

#include <span>

#include "gpu/core/philox.h"
#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"
#include "gpu/core/tensor.h"
#include "gpu/ops/logprobs.h"

namespace tandem::gpu::ops {

/// tokens[r] drawn from row r's filtered distribution (sampling_params' steps 1-5) and
/// logprobs[r] = its logprob there, bit for bit what logprobs_forward returns for the same logits,
/// target and params (the same CPU code computes both).
/// The draw (temperature > 0): u = uniform_float(random_words(coordinates[r])[0]) in [0, 1);
/// walk the kept tokens in ascending id order accumulating c += e_j / S in double, and take the
/// first token with u < c (the last kept token should rounding leave c below u at the end).
/// Greedy (temperature == 0): the first-ranked token (largest logit, lowest id on ties; top-k and
/// top-p never mask it), no random number used, and as its logprob the score logprobs_forward
/// gives it at temperature 1 with the same top_k and top_p (so greedy rows are scored at T = 1).
/// Refuses a coordinates count other than rows and a non-finite logit (on CUDA such a row gets
/// token -1 and a NaN logprob instead: the check would cost a stream synchronisation). On
/// failure, outputs are unspecified and inputs untouched.
///   logits      F32|F64 [rows, V] (CUDA: F32|BF16)
///   coordinates rows entries (seed, step, round, prompt, sample, position of each row's token)
///   tokens      I32 [rows]
///   logprobs    logits' dtype [rows], or F32 with BF16 logits
status sampling_forward(const exec_context& ctx, const tensor& logits, const sampling_params& params,
                        std::span<const rng_coordinates> coordinates, const tensor& tokens, const tensor& logprobs);

/// The same with the coordinates in the logits' device memory, so that work captured once
/// (captured_work.h) draws with new coordinates on every replay: row r's rng_coordinates are the
/// 32 bytes of coordinates[r] (its layout: seed as two words, low first, then step, round, prompt,
/// sample, position). Refuses a shape other than [rows, 8].
///   coordinates I32 [rows, 8], on the logits' device
status sampling_forward(const exec_context& ctx, const tensor& logits, const sampling_params& params, const tensor& coordinates,
                        const tensor& tokens, const tensor& logprobs);

}  // namespace tandem::gpu::ops
