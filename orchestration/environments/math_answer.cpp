// The math answer checkers (math_answer.h). Every step works on code points, so a character is
// what Python's str calls one.
#include "orchestration/environments/math_answer.h"

#include <array>
#include <utility>

#include "orchestration/environments/unicode_text.h"

namespace tandem::environments {
namespace {

using text = std::u32string;
using view = std::u32string_view;

bool starts_at(view s, std::size_t i, view prefix) { return s.size() >= i + prefix.size() && s.compare(i, prefix.size(), prefix) == 0; }

text replace_all(view s, view from, view to) {
  if (from.empty()) return text(s);
  text out;
  std::size_t i = 0;
  for (std::size_t hit = s.find(from); hit != view::npos; hit = s.find(from, i)) {
    out.append(s.substr(i, hit - i));
    out.append(to);
    i = hit + from.size();
  }
  out.append(s.substr(i));
  return out;
}

/// DAPO's substitutions, in order, then its removed expressions.
const std::array<std::pair<view, view>, 10> substitutions = {{
    {U"an ", U""}, {U"a ", U""}, {U".$", U"$"}, {U"\\$", U""}, {U"\\ ", U""}, {U" ", U""},
    {U"mbox", U"text"}, {U",\\text{and}", U","}, {U"\\text{and}", U","}, {U"\\text{m}", U"\\text{}"},
}};
const std::array<view, 41> removed = {
    U"square", U"ways", U"integers", U"dollars", U"mph", U"inches", U"hours", U"km", U"units", U"\\ldots",
    U"sue", U"points", U"feet", U"minutes", U"digits", U"cents", U"degrees", U"cm", U"gm", U"pounds",
    U"meters", U"meals", U"edges", U"students", U"childrentickets", U"multiples", U"\\text{s}", U"\\text{.}",
    U"\\text{\ns}", U"\\text{}^2", U"\\text{}^3", U"\\text{\n}", U"\\text{}", U"\\mathrm{th}", U"^\\circ",
    U"^{\\circ}", U"\\;", U",\\!", U"{,}", U"\"", U"\\dots",
};

/// Each line holding two "$" becomes "$" + the text between its first two "$" + "$".
text unwrap_dollars(view s) {
  text out;
  std::size_t begin = 0;
  while (begin <= s.size()) {
    const std::size_t nl = s.find(U'\n', begin);
    const std::size_t end = nl == view::npos ? s.size() : nl;
    const view line = s.substr(begin, end - begin);
    const std::size_t a = line.find(U'$');
    const std::size_t b = a == view::npos ? view::npos : line.find(U'$', a + 1);
    if (b != view::npos) out.append(U"$").append(line.substr(a + 1, b - a - 1)).append(U"$");
    else out.append(line);
    if (nl == view::npos) break;
    out.push_back(U'\n');
    begin = nl + 1;
  }
  return out;
}

/// Every `command` + "{...}" whose content holds no newline and ends at the first "}" (lazy) or
/// the line's last "}" (greedy) becomes its content.
text unwrap_command(view s, view command, bool greedy) {
  text out;
  std::size_t i = 0;
  while (i < s.size()) {
    if (starts_at(s, i, command)) {
      const std::size_t from = i + command.size();
      std::size_t close = view::npos;
      for (std::size_t j = from; j < s.size() && s[j] != U'\n'; ++j) {
        if (s[j] != U'}') continue;
        close = j;
        if (!greedy) break;
      }
      if (close != view::npos) {
        out.append(s.substr(from, close - from));
        i = close + 1;
        continue;
      }
    }
    out.push_back(s[i++]);
  }
  return out;
}

/// \fracab -> \frac{a}{b} (a is anything but "{", b anything but a newline); \sqrta -> \sqrt{a}.
text spell_out_shorthand(view s) {
  text out;
  for (std::size_t i = 0; i < s.size();) {
    if (starts_at(s, i, U"frac") && i + 5 < s.size() && s[i + 4] != U'{' && s[i + 5] != U'\n') {
      out.append(U"frac{").append(1, s[i + 4]).append(U"}{").append(1, s[i + 5]).append(U"}");
      i += 6;
    } else {
      out.push_back(s[i++]);
    }
  }
  text out2;
  for (std::size_t i = 0; i < out.size();) {
    if (starts_at(out, i, U"sqrt") && i + 4 < out.size() && out[i + 4] != U'{') {
      out2.append(U"sqrt{").append(1, out[i + 4]).append(U"}");
      i += 5;
    } else {
      out2.push_back(out[i++]);
    }
  }
  return out2;
}

text last_code_points(view s, std::size_t n) { return text(s.size() > n ? s.substr(s.size() - n) : s); }

/// The last boxed expression of `s`, as last_boxed.
std::optional<text> last_boxed_of(view s) {
  const std::size_t at = s.rfind(U"\\boxed{");
  if (at == view::npos) return std::nullopt;
  int open = 0;
  for (std::size_t i = at; i < s.size(); ++i) {
    if (s[i] == U'{') ++open;
    if (s[i] == U'}' && --open == 0) return text(s.substr(at, i - at + 1));
  }
  return std::nullopt;
}

/// Whether s[i..] starts with "answer" in any case (with Python's case folding: U+017F is an s).
bool answer_word_at(view s, std::size_t i) {
  static constexpr char32_t word[] = U"answer";
  if (i + 6 > s.size()) return false;
  for (std::size_t k = 0; k < 6; ++k) {
    char32_t c = s[i + k];
    if (c >= U'A' && c <= U'Z') c = c - U'A' + U'a';
    if (c == 0x017F) c = U's';
    if (c != word[k]) return false;
  }
  return true;
}

/// The texts captured by findall of (?i)Answer\s*:\s*([^\n]+) over `s`, the last one.
std::optional<text> last_answer_line(view s) {
  std::optional<text> last;
  for (std::size_t i = 0; i < s.size();) {
    if (!answer_word_at(s, i)) {
      ++i;
      continue;
    }
    std::size_t j = i + 6;
    while (j < s.size() && is_space(s[j])) ++j;
    if (j >= s.size() || s[j] != U':') {
      ++i;
      continue;
    }
    const std::size_t colon = j;
    std::size_t ws_end = colon + 1;
    while (ws_end < s.size() && is_space(s[ws_end])) ++ws_end;
    // The greedy \s* gives back characters until [^\n]+ can start: the last non-newline.
    std::optional<std::size_t> start;
    if (ws_end < s.size()) start = ws_end;
    else
      for (std::size_t k = ws_end; k > colon + 1; --k)
        if (s[k - 1] != U'\n') {
          start = k - 1;
          break;
        }
    if (!start) {
      ++i;
      continue;
    }
    std::size_t end = s.find(U'\n', *start);
    if (end == view::npos) end = s.size();
    last = text(s.substr(*start, end - *start));
    i = end;
  }
  return last;
}

text normalize(view answer) {
  const std::size_t eq = answer.rfind(U'=');
  text s(eq == view::npos ? answer : answer.substr(eq + 1));
  for (const auto& [from, to] : substitutions) s = replace_all(s, from, to);
  for (const view r : removed) s = replace_all(s, r, U"");
  s = unwrap_dollars(s);
  s = unwrap_command(s, U"\\text{", false);
  s = unwrap_command(s, U"\\textbf{", false);
  s = unwrap_command(s, U"\\overline{", false);
  s = unwrap_command(s, U"\\boxed{", true);
  s = spell_out_shorthand(s);
  s = replace_all(s, U"$", U"");
  const text digits = replace_all(s, U",", U"");
  bool all_digits = !digits.empty();
  for (const char32_t c : digits) all_digits = all_digits && c >= U'0' && c <= U'9';
  if (all_digits) s = digits;
  return strip(s);
}

}  // namespace

std::string normalize_final_answer(std::string_view answer) { return utf8(normalize(code_points(answer))); }

std::optional<std::string> last_boxed(std::string_view s) {
  const auto b = last_boxed_of(code_points(s));
  if (!b) return std::nullopt;
  return utf8(*b);
}

answer_verdict check_answer_line(std::string_view response, std::string_view ground_truth) {
  const text tail = last_code_points(code_points(response), 300);
  const auto line = last_answer_line(tail);
  const text prediction = normalize(line ? view(*line) : view(U"[INVALID]"));
  return {prediction == normalize(code_points(ground_truth)), utf8(prediction)};
}

answer_verdict check_strict_boxed(std::string_view response, std::string_view ground_truth) {
  const text tail = last_code_points(code_points(response), 100);
  const auto boxed = last_boxed_of(tail);
  const text prediction = boxed ? boxed->substr(7, boxed->size() - 8) : text(U"[INVALID]");
  return {prediction == code_points(ground_truth), utf8(prediction)};
}

}  // namespace tandem::environments
