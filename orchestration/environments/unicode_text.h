// The few Unicode facts the answer checkers need to treat text as Python's str does: code points
// (not bytes) for lengths and slices, and str.isspace()'s whitespace.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::environments {

/// The code points of `text` (UTF-8; an invalid byte becomes U+FFFD, as a lossy decode does).
std::u32string code_points(std::string_view text);
/// UTF-8 of `text`.
std::string utf8(std::u32string_view text);

/// Python's str.isspace(): ASCII whitespace, U+001C..U+001F, U+0085, U+00A0, U+1680,
/// U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000.
bool is_space(char32_t c);

/// Python's str.strip() with no argument.
std::u32string strip(std::u32string_view text);

}  // namespace tandem::environments
