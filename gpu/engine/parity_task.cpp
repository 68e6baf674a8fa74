// The parity task's prompts and reward (parity_task.h).
#include "gpu/engine/parity_task.h"

#include "plain/splitmix64.h"

namespace tandem::gpu {

std::vector<std::vector<std::int32_t>> parity_prompts(std::uint64_t seed, std::size_t count, std::int32_t vocab,
                                                      std::int32_t lowest) {
  std::vector<std::vector<std::int32_t>> prompts(count);
  const auto span = static_cast<std::uint64_t>(vocab > lowest ? vocab - lowest : 1);
  // SplitMix64 over a counter: the prompt set's only randomness.
  std::uint64_t counter = plain::splitmix64(seed ^ 0x70726F6D707473ull);  // "prompts"
  const auto next = [&counter] { return plain::splitmix64(++counter); };
  for (auto& prompt : prompts) {
    const std::size_t length = 3 + next() % 6;
    for (std::size_t i = 0; i < length; ++i) prompt.push_back(static_cast<std::int32_t>(lowest + next() % span));
  }
  return prompts;
}

double parity_reward(std::span<const std::int32_t> generated) {
  return !generated.empty() && generated.back() % 2 == 0 ? 1.0 : 0.0;
}

}  // namespace tandem::gpu
