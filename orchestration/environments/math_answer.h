// The answer checkers of the math environment, as DAPO defines them (its math_dapo reward; the
// text is handled as Python's str: in code points, with str.isspace()'s whitespace):
//
//   answer_line   the response's last 300 characters; the text after the last "Answer:" (any
//                 case, whitespace around the colon) up to the end of its line, normalised,
//                 equal to the normalised ground truth
//   strict_boxed  the response's last 100 characters; the content of their last balanced
//                 \boxed{...}, equal to the ground truth as given
//
// Normalisation (normalize_final_answer) keeps what follows the last "=", applies DAPO's fixed
// substitutions and removals (units, "\text{}", "\;", ...), unwraps $...$, \text{}, \textbf{},
// \overline{} and \boxed{}, spells out shorthand \fracab and \sqrta, drops "$", drops the commas
// of a number made only of digits and commas, and strips whitespace. One difference from Python:
// only 0-9 count as digits there (Python's isdigit() also takes other scripts' digits).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace tandem::environments {

/// DAPO's normalisation of a final answer (above).
std::string normalize_final_answer(std::string_view answer);

/// The last "\boxed{...}" of `text`, braces balanced from its opening brace; none when there is
/// no "\boxed{" or its braces never close.
std::optional<std::string> last_boxed(std::string_view text);

struct answer_verdict {
  bool correct = false;
  std::string prediction;  ///< what was compared: the normalised answer, the boxed content, or "[INVALID]"
};

/// The answer_line checker (above).
answer_verdict check_answer_line(std::string_view response, std::string_view ground_truth);

/// The strict_boxed checker (above).
answer_verdict check_strict_boxed(std::string_view response, std::string_view ground_truth);

}  // namespace tandem::environments
