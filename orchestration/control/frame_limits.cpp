// The controller's frame limit for a recipe (frame_limits.hpp).
#include "orchestration/control/frame_limits.hpp"

#include <algorithm>
#include <cstdint>

#include "orchestration/control/codec.hpp"

namespace tandem::control {

std::size_t controller_frame_limit(const config::recipe_config& r) {
  const auto positive = [](std::int64_t v) { return static_cast<std::uint64_t>(std::max<std::int64_t>(v, 1)); };
  const std::uint64_t sequences = positive(r.grpo.num_prompts_per_step) * positive(r.grpo.num_generations_per_prompt);
  const std::uint64_t new_tokens = positive(r.policy.generation.max_new_tokens);
  // A finished sequence: request id 8, tokens 4 + 4 n, logprobs 4 + 4 n, reason 1, version 8.
  const std::uint64_t generate = 64 + sequences * (25 + 8 * new_tokens);
  // A logprob_result: one excluded-token count per sequence, nothing per token.
  const std::uint64_t logprobs = 64 + 4 * sequences;
  const std::uint64_t wanted = 2 * std::max(generate, logprobs);
  return static_cast<std::size_t>(std::clamp<std::uint64_t>(wanted, std::uint64_t{16} << 20, max_frame_bytes));
}

}  // namespace tandem::control
