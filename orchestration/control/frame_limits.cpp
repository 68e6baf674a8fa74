// The controller's frame limit for a recipe (frame_limits.hpp).
#include "orchestration/control/frame_limits.hpp"

#include <algorithm>
#include <cstdint>

#include "orchestration/control/codec.hpp"

namespace tandem::control {

std::size_t controller_frame_limit(const config::recipe_config& r) {
  const auto positive = [](std::int64_t v) { return static_cast<std::uint64_t>(std::max<std::int64_t>(v, 1)); };
  // The most sequences one generate_result can hold: a generation round given to one rollout
  // worker (num_prompts_per_step x batch_multiplier with dynamic sampling, x generations), or a
  // validation round of grpo.val_batch_size greedy responses.
  const std::uint64_t multiplier = r.grpo.use_dynamic_sampling ? positive(r.grpo.batch_multiplier) : 1;
  const std::uint64_t round = positive(r.grpo.num_prompts_per_step) * multiplier * positive(r.grpo.num_generations_per_prompt);
  const std::uint64_t validation = r.grpo.val_period > 0 || r.grpo.val_at_start || r.grpo.val_at_end
                                       ? positive(r.grpo.val_batch_size)
                                       : 0;
  const std::uint64_t sequences = std::max(round, validation);
  const std::uint64_t new_tokens = positive(r.policy.generation.max_new_tokens);
  // A finished sequence: request id 8, tokens 4 + 4 n, logprobs 4 + 4 n, reason 1, version 8.
  const std::uint64_t generate = 64 + sequences * (25 + 8 * new_tokens);
  // A logprob_result: one excluded-token count per sequence, nothing per token.
  const std::uint64_t logprobs = 64 + 4 * sequences;
  const std::uint64_t wanted = 2 * std::max(generate, logprobs);
  return static_cast<std::size_t>(std::clamp<std::uint64_t>(wanted, std::uint64_t{16} << 20, max_frame_bytes));
}

}  // namespace tandem::control
