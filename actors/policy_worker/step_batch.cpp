// A rank's step batch and the loss inputs it builds (step_batch.hpp).
#include "actors/policy_worker/step_batch.hpp"

#include <cmath>

namespace tandem {
namespace {

std::string n(std::size_t x) { return std::to_string(x); }

std::size_t length(const gpu::packed_sequences& p, std::size_t s) {
  return static_cast<std::size_t>(p.offsets[s + 1] - p.offsets[s]);
}

}  // namespace

std::optional<std::string> check_logprobs_job(const logprobs_job& job) {
  const auto& p = job.sequences;
  if (p.offsets.empty() || p.offsets.front() != 0 || static_cast<std::size_t>(p.offsets.back()) != p.tokens.size())
    return "sequences.offsets must rise from 0 to the token count (" + n(p.tokens.size()) + ")";
  const std::size_t sequences = p.offsets.size() - 1;
  for (std::size_t s = 0; s < sequences; ++s)
    if (p.offsets[s + 1] < p.offsets[s]) return "sequences.offsets fall at sequence " + n(s);
  if (job.prompt_tokens.size() != sequences)
    return "prompt_tokens holds " + n(job.prompt_tokens.size()) + " values for " + n(sequences) + " sequences";
  if (job.generated_with.size() != sequences)
    return "generated_with holds " + n(job.generated_with.size()) + " values for " + n(sequences) + " sequences";
  std::size_t generated = 0;
  for (std::size_t s = 0; s < sequences; ++s) {
    const auto prompt = job.prompt_tokens[s];
    if (prompt < 1 || static_cast<std::size_t>(prompt) > length(p, s))
      return "sequence " + n(s) + ": prompt_tokens " + std::to_string(prompt) + " outside [1, " + n(length(p, s)) + "]";
    generated += length(p, s) - static_cast<std::size_t>(prompt);
  }
  if (job.lp_gen.size() != generated)
    return "lp_gen holds " + n(job.lp_gen.size()) + " values for " + n(generated) + " generated tokens";
  return std::nullopt;
}

std::vector<std::int32_t> excluded_tokens(const gpu::packed_sequences& sequences,
                                          const std::vector<std::int32_t>& prompt_tokens,
                                          const std::vector<float>& lp_prev) {
  std::vector<std::int32_t> out(prompt_tokens.size(), 0);
  for (std::size_t s = 0; s < prompt_tokens.size(); ++s)
    for (auto t = sequences.offsets[s] + prompt_tokens[s]; t < sequences.offsets[s + 1]; ++t)
      if (std::isinf(lp_prev[static_cast<std::size_t>(t)]) && lp_prev[static_cast<std::size_t>(t)] < 0) ++out[s];
  return out;
}

std::optional<std::string> check_train_job(const train_job& job, const step_batch& batch) {
  if (job.step != batch.step)
    return "it is for step " + std::to_string(job.step) + ", the logprobs kept are step " + std::to_string(batch.step) + "'s";
  if (job.advantages.size() != batch.size())
    return "advantages holds " + n(job.advantages.size()) + " values for " + n(batch.size()) + " sequences";
  if (job.loss_multipliers.size() != batch.size())
    return "loss_multipliers holds " + n(job.loss_multipliers.size()) + " values for " + n(batch.size()) + " sequences";
  if (job.optimizer_steps.empty()) return "it has no optimizer step";
  std::size_t covered = 0;
  for (const auto& o : job.optimizer_steps) covered += o.sequences;
  if (covered != batch.size())
    return "its optimizer steps cover " + n(covered) + " sequences, the logprobs kept " + n(batch.size());
  if (job.micro_batch_tokens <= 0) return "micro_batch_tokens must be > 0, got " + std::to_string(job.micro_batch_tokens);
  if (!known(job.objective)) return "its objective " + std::to_string(static_cast<int>(job.objective)) + " is not known";
  return std::nullopt;
}

std::vector<gpu::train_micro_batch_data> make_micro_batches(const step_batch& batch, std::size_t first_sequence,
                                                            std::size_t last_sequence,
                                                            const std::vector<double>& advantages,
                                                            const std::vector<double>& loss_multipliers,
                                                            std::int64_t token_budget) {
  const auto& p = batch.sequences;
  std::vector<std::size_t> generated_start(batch.size() + 1, 0);  // offset of each sequence's lp_gen
  for (std::size_t s = 0; s < batch.size(); ++s)
    generated_start[s + 1] = generated_start[s] + length(p, s) - static_cast<std::size_t>(batch.prompt_tokens[s]);

  std::vector<gpu::train_micro_batch_data> out;
  for (std::size_t first = first_sequence, last = first_sequence; first < last_sequence; first = last) {
    // [first, last): as many whole sequences as the budget holds, at least one.
    last = first + 1;
    while (last < last_sequence && p.offsets[last + 1] - p.offsets[first] <= token_budget) ++last;
    gpu::train_micro_batch_data mb;
    mb.sequences.offsets.push_back(0);
    for (std::size_t s = first; s < last; ++s) {
      const auto begin = static_cast<std::size_t>(p.offsets[s]), end = static_cast<std::size_t>(p.offsets[s + 1]);
      const std::size_t prompt = static_cast<std::size_t>(batch.prompt_tokens[s]);
      mb.sequences.tokens.insert(mb.sequences.tokens.end(), p.tokens.begin() + static_cast<std::ptrdiff_t>(begin),
                                 p.tokens.begin() + static_cast<std::ptrdiff_t>(end));
      mb.sequences.offsets.push_back(static_cast<std::int32_t>(mb.sequences.tokens.size()));
      const float adv = static_cast<float>(advantages[s]);
      const float m = static_cast<float>(loss_multipliers[s]);
      for (std::size_t t = begin; t < end; ++t) {
        const bool generated = t - begin >= prompt;
        const float lp_prev = batch.lp_prev[t];
        mb.advantages.push_back(adv);
        mb.mask.push_back(generated && !(std::isinf(lp_prev) && lp_prev < 0) ? m : 0.0f);
        mb.lp_gen.push_back(generated ? batch.lp_gen[generated_start[s] + (t - begin - prompt)] : 0.0f);
        mb.lp_prev.push_back(lp_prev);
        if (!batch.lp_ref.empty()) mb.lp_ref.push_back(batch.lp_ref[t]);
      }
    }
    out.push_back(std::move(mb));
  }
  return out;
}

}  // namespace tandem
