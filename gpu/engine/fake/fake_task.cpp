// The fake task's prompts and reward (fake_task.h).
#include "gpu/engine/fake/fake_task.h"

#include "gpu/engine/fake/fake_weights.h"

namespace tandem::gpu {

std::vector<std::vector<std::int32_t>> fake_prompts(std::uint64_t seed, std::size_t count, std::int32_t vocab) {
  std::vector<std::vector<std::int32_t>> prompts(count);
  const auto span = static_cast<std::uint64_t>(vocab > 2 ? vocab - 2 : 1);
  std::uint64_t counter = fake_mix64(seed ^ 0x70726F6D707473ull);  // "prompts"
  const auto next = [&counter] { return fake_mix64(++counter); };
  for (auto& prompt : prompts) {
    const std::size_t length = 3 + next() % 6;
    for (std::size_t i = 0; i < length; ++i) prompt.push_back(static_cast<std::int32_t>(2 + next() % span));
  }
  return prompts;
}

double fake_parity_reward(std::span<const std::int32_t> generated) {
  return !generated.empty() && generated.back() % 2 == 0 ? 1.0 : 0.0;
}

}  // namespace tandem::gpu
