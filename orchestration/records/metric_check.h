// Metric gates: one comparison over a run's series (metrics_export.h), in a small language of
// our own, for CI tests and `tandem metrics check`:
//
//   median(train/token_mult_prob_error) == 1
//   train/reward[20] > -1.15
//   mean(train/gen_kl_error) < 0.001
//   ratio_above(train/token_mult_prob_error, 1.05) <= 0.01
//   max(train/reward) > min(validation/reward)
//
// Grammar (spaces between tokens are ignored):
//   check    = operand compare operand
//   compare  = "<" | "<=" | ">" | ">=" | "=="
//   operand  = number
//            | metric "[" step "]"                 the metric's value at that step
//            | reduce "(" metric ")"               over every step that has a value
//            | "ratio_above" "(" metric "," number ")"
//   reduce   = "mean" | "median" | "min" | "max"
//   metric   = name | '"' any characters but '"' '"'
//   name     = letter or '_', then letters, digits and _ / . - @ :
//   step     = digits (a step >= 0; 0 is validation before the first step)
//   number   = ["+" | "-"] digits ["." digits] [("e" | "E") ["+" | "-"] digits]   (also ".5", "5.")
//
// median of an even count is the mean of the middle two; ratio_above(m, x) is the fraction of
// m's steps whose value is >= x. Comparisons are exact on doubles. A metric alone, without a step
// or a function, is an error: which value was meant is not guessed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "orchestration/records/metrics_export.h"

namespace tandem::records {

/// One side of a check.
struct check_operand {
  enum class kind { number, at_step, mean, median, min, max, ratio_above };
  kind what = kind::number;
  double number = 0;       ///< number: the value; ratio_above: the threshold
  std::string metric;      ///< every kind but number
  std::int64_t step = 0;   ///< at_step
  std::string text;        ///< as written, normalized ("mean(train/loss)", "train/reward[20]", "1")
};

enum class check_compare { less, less_equal, greater, greater_equal, equal };

/// "<", "<=", ">", ">=", "==".
const char* to_string(check_compare c);

/// A parsed check.
struct metric_check {
  check_operand left;
  check_compare compare = check_compare::equal;
  check_operand right;
  std::string text;  ///< normalized: "mean(train/loss) < 0.5"
};

/// Parses one check. Error: bad_expression ("'mean(x' at column 7: expected ')'").
metrics_result<metric_check> parse_check(std::string_view expression);

/// What a check found.
struct check_outcome {
  bool holds = false;
  double left = 0, right = 0;  ///< the values compared

  /// "mean(train/loss) = 0.52" for each side that is not a plain number, joined by ", ".
  std::string values(const metric_check& c) const;
};

/// The value of `operand` in `table`. Errors: missing_metric ("no metric 'train/rewad' (metrics:
/// ...)"), missing_step ("metric 'train/reward' has no step 20 (it has steps 1 to 10)").
metrics_result<double> evaluate(const check_operand& operand, const metric_table& table);

/// Evaluates both sides and compares them; errors as evaluate's.
metrics_result<check_outcome> evaluate(const metric_check& check, const metric_table& table);

/// A number as the shortest text that reads back as the same double ("0.1", "1e-05", "3").
std::string format_number(double v);

}  // namespace tandem::records
