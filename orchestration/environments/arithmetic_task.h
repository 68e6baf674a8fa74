// The arithmetic task (env.name arithmetic): the built-in task a small model learns in minutes,
// so a run shows learning without a dataset. Its problems are every sum a + b of two operands in
// [0, max_operand], written "a+b=" with the answer "c" (decimal, no spaces); a response is right
// when its text, surrounding whitespace removed, is exactly the answer.
//
// The problems are split once per seed: all of them in a seeded order, the first `held_out` the
// validation set and the rest the training set, so no validation problem is ever trained on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::environments {

struct arithmetic_problem {
  std::string question;  ///< "17+25="
  std::string answer;    ///< "42"
  bool operator==(const arithmetic_problem&) const = default;
};

/// The largest max_operand the task takes (its problem count, (max + 1)^2, stays in memory).
inline constexpr std::int64_t max_arithmetic_operand = 999;

struct arithmetic_split {
  std::vector<arithmetic_problem> training;
  std::vector<arithmetic_problem> validation;
};

/// Every problem with operands in [0, max_operand] (>= 1, <= max_arithmetic_operand) in the order
/// of `seed`, the first `held_out` (fewer than the problem count) as the validation set.
arithmetic_split arithmetic_problems(std::uint64_t seed, std::int64_t max_operand, std::size_t held_out);

/// 1 when `response` (decoded text), surrounding whitespace removed, equals `answer`; else 0.
double arithmetic_reward(std::string_view response, std::string_view answer);

}  // namespace tandem::environments
