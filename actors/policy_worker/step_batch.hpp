// What a policy rank keeps of an RL step between its logprob pass and its train job, and the
// loss inputs it builds from that (DESIGN.md section 9). The driver sends a rank its trajectories
// once (tokens, prompt lengths, the generator's logprobs); the rank computes lp_prev (and lp_ref)
// and keeps them here; the train job then carries one advantage and one loss multiplier per
// sequence, and the rank expands them per token. Per-token data never returns to the driver.
//
// Sequence s of the batch is prompt + generated tokens. Per token t of it, in a micro-batch:
//   mask       0 on prompt tokens (token 0 is always one); on generated tokens the sequence's loss
//              multiplier, except 0 where lp_prev is -inf (the trainer's top-k / top-p masks
//              exclude a token the generator sampled: it cannot be scored, so it leaves the loss)
//   advantage  the sequence's advantage on every token
//   lp_gen     the generator's logprob on generated tokens, 0 on prompt tokens
//   lp_prev    the rank's logprob pass; lp_ref the reference's (empty without the KL term)
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "actors/api/messages.hpp"
#include "gpu/engine/train_engine.h"

namespace tandem {

/// A rank's sequences of one step and their logprobs.
struct step_batch {
  std::uint32_t step = 0;
  weight_version version = 0;              ///< the weights that computed lp_prev
  gpu::packed_sequences sequences;         ///< I32 tokens [T], offsets [S + 1]
  std::vector<std::int32_t> prompt_tokens; ///< I32 [S]
  std::vector<float> lp_gen;               ///< F32 [generated tokens], sequence after sequence
  std::vector<float> lp_prev;              ///< F32 [T]; token 0 of each sequence 0
  std::vector<float> lp_ref;               ///< F32 [T], or empty (no KL term)
  std::vector<std::int32_t> excluded;      ///< I32 [S]: generated tokens with lp_prev -inf

  std::size_t size() const { return prompt_tokens.size(); }
};

/// The first inconsistency of a logprobs job ("prompt_tokens holds 3 values for 4 sequences"),
/// or nothing: offsets rise from 0 to the token count, one prompt length in [1, length] and one
/// version per sequence, one lp_gen per generated token.
std::optional<std::string> check_logprobs_job(const logprobs_job& job);

/// Per sequence, the generated tokens whose lp_prev is -inf.
std::vector<std::int32_t> excluded_tokens(const gpu::packed_sequences& sequences,
                                          const std::vector<std::int32_t>& prompt_tokens,
                                          const std::vector<float>& lp_prev);

/// The first inconsistency of a train job against the batch it trains on, or nothing: the same
/// step and version, one advantage and multiplier per sequence, optimizer steps (at least one)
/// whose sequences add up to the batch's, a positive token budget.
std::optional<std::string> check_train_job(const train_job& job, const step_batch& batch);

/// Micro-batches over sequences [first, last) of `batch`, cut by a token budget: sequences go, in
/// order, into the current micro-batch while its tokens (prompt plus generated) stay within
/// `token_budget`; a sequence longer than the budget gets a micro-batch of its own. So a
/// micro-batch's activations are bounded by tokens, and short sequences share one pass.
/// `advantages` and `loss_multipliers` hold one value per sequence of the batch.
std::vector<gpu::train_micro_batch_data> make_micro_batches(const step_batch& batch, std::size_t first, std::size_t last,
                                                            const std::vector<double>& advantages,
                                                            const std::vector<double>& loss_multipliers,
                                                            std::int64_t token_budget);

}  // namespace tandem
