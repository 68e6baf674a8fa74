// The arithmetic task's problems and reward (arithmetic_task.h).
#include "orchestration/environments/arithmetic_task.h"

#include <algorithm>

#include "orchestration/data/prompt_order.h"

namespace tandem::environments {

arithmetic_split arithmetic_problems(std::uint64_t seed, std::int64_t max_operand, std::size_t held_out) {
  const auto n = static_cast<std::size_t>(max_operand + 1);
  // The problems in a seeded order: one epoch of the prompt order over all (a, b) pairs.
  const std::vector<std::size_t> order = data::seeded_permutation(n * n, seed);
  arithmetic_split out;
  out.validation.reserve(held_out);
  out.training.reserve(n * n - std::min(held_out, n * n));
  for (std::size_t i = 0; i < order.size(); ++i) {
    const std::size_t a = order[i] / n, b = order[i] % n;
    arithmetic_problem p{std::to_string(a) + "+" + std::to_string(b) + "=", std::to_string(a + b)};
    (i < held_out ? out.validation : out.training).push_back(std::move(p));
  }
  return out;
}

double arithmetic_reward(std::string_view response, std::string_view answer) {
  const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; };
  while (!response.empty() && space(response.front())) response.remove_prefix(1);
  while (!response.empty() && space(response.back())) response.remove_suffix(1);
  return response == answer ? 1.0 : 0.0;
}

}  // namespace tandem::environments
