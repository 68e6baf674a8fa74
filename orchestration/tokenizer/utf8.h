// UTF-8 as the tokenizer needs it: where the first invalid byte of a text is, and how long the
// character at an offset is (the BPE model's initial symbols are characters).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace tandem::tokenizer {

/// The byte offset of the first byte that does not belong to a well-formed UTF-8 sequence
/// (overlong forms, surrogates and code points above U+10FFFF included); none for valid text.
std::optional<std::size_t> first_invalid_utf8(std::string_view text);

/// The sentence a tokenizer refuses non-UTF-8 text with ("the text is not UTF-8: byte 3 (0xC3)
/// starts no valid sequence"); none for valid text.
std::optional<std::string> utf8_refusal(std::string_view text);

/// The length in bytes (1 to 4) of the character that starts at text[at], in valid UTF-8.
std::size_t utf8_length(std::string_view text, std::size_t at);

}  // namespace tandem::tokenizer
