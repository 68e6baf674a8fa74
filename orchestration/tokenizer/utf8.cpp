// UTF-8 checks (utf8.h).
#include "orchestration/tokenizer/utf8.h"

#include <cstdint>
#include <cstdio>

namespace tandem::tokenizer {

std::optional<std::string> utf8_refusal(std::string_view text) {
  const auto bad = first_invalid_utf8(text);
  if (!bad) return std::nullopt;
  char byte[8];
  std::snprintf(byte, sizeof byte, "0x%02X", static_cast<unsigned>(static_cast<unsigned char>(text[*bad])));
  return "the text is not UTF-8: byte " + std::to_string(*bad) + " (" + byte + ") starts no valid sequence";
}

std::optional<std::size_t> first_invalid_utf8(std::string_view text) {
  const auto byte = [&](std::size_t i) { return static_cast<std::uint8_t>(text[i]); };
  std::size_t i = 0;
  while (i < text.size()) {
    const std::uint8_t b = byte(i);
    std::size_t n = 0;
    std::uint32_t cp = 0, min = 0;
    if (b < 0x80) { ++i; continue; }
    if ((b & 0xE0) == 0xC0) { n = 2; cp = b & 0x1F; min = 0x80; }
    else if ((b & 0xF0) == 0xE0) { n = 3; cp = b & 0x0F; min = 0x800; }
    else if ((b & 0xF8) == 0xF0) { n = 4; cp = b & 0x07; min = 0x10000; }
    else return i;
    if (i + n > text.size()) return i;
    for (std::size_t k = 1; k < n; ++k) {
      if ((byte(i + k) & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (byte(i + k) & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += n;
  }
  return std::nullopt;
}

std::size_t utf8_length(std::string_view text, std::size_t at) {
  const auto b = static_cast<std::uint8_t>(text[at]);
  if (b < 0x80) return 1;
  if ((b & 0xE0) == 0xC0) return 2;
  if ((b & 0xF0) == 0xE0) return 3;
  return 4;
}

}  // namespace tandem::tokenizer
