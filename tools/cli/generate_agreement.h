// How closely the train engine scores what the generate engine sampled, on the same weights and
// device: the figure RL systems watch as token_mult_prob_error (per generated token
// exp(|logprob_train - logprob_generated|), 1 when they agree exactly). `tandem bench generate
// --agreement` samples the benchmark's batch again at the settings RL runs use (temperature 0.7,
// top-k 20, top-p 0.9 by default) and scores every sequence with a train engine built over the
// same random initial weights.
#pragma once

#include <cstdint>
#include <memory>

#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"
#include "gpu/engine/gemma4_generate_engine.h"
#include "gpu/ops/logprobs.h"

namespace tandem::cli {

struct generate_bench_settings;

struct agreement_figures {
  gpu::ops::sampling_params sampling;
  std::int64_t sequences = 0, tokens = 0;  ///< generated tokens scored
  std::int64_t identical = 0;              ///< tokens whose two logprobs are the same bits
  double mean_error = 0;                   ///< token_mult_prob_error over every token
  double median_sequence_error = 0;        ///< the median over sequences of each one's mean
  double max_error = 0;                    ///< the largest token's
};

/// Samples `s`'s batch with `generator` (idle, on ctx, its weights the random initial ones of `s`)
/// at `sampling`, releases the generator, then scores the sequences with a train engine over the same
/// weights, `score_tokens` packed tokens a call. An error names the phase that failed.
gpu::result<agreement_figures> measure_agreement(const generate_bench_settings& s, const gpu::exec_context& ctx,
                                                 std::unique_ptr<gpu::gemma4_generate_engine> generator,
                                                 const gpu::ops::sampling_params& sampling, std::int64_t score_tokens = 8192);

}  // namespace tandem::cli
