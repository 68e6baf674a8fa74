// printable(): escaping outside text for logs and terminals (printable.h).
#include "gpu/core/printable.h"

#include <cstdint>

namespace tandem::gpu {

namespace {

const char* hex = "0123456789abcdef";

void escape_byte(std::string& out, unsigned char c) {
  out += "\\x";
  out += hex[c >> 4];
  out += hex[c & 15];
}

void escape_code_point(std::string& out, std::uint32_t cp) {
  out += "\\u";
  for (int shift = 12; shift >= 0; shift -= 4) out += hex[(cp >> shift) & 15];
}

/// Length of the valid UTF-8 sequence at `s[i]` and its code point, or 0 when it is not one.
std::size_t utf8_sequence(std::string_view s, std::size_t i, std::uint32_t& cp) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  std::size_t n = 0;
  if (c >= 0xc2 && c <= 0xdf) n = 2, cp = c & 0x1f;
  else if (c >= 0xe0 && c <= 0xef) n = 3, cp = c & 0x0f;
  else if (c >= 0xf0 && c <= 0xf4) n = 4, cp = c & 0x07;
  else return 0;
  if (i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    if ((b(k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (b(k) & 0x3f);
  }
  const std::uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < least[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;  // overlong, surrogate
  return n;
}

bool dangerous_code_point(std::uint32_t cp) {
  return (cp >= 0x80 && cp <= 0x9f) ||                      // C1 controls (0x9b is CSI)
         (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069) ||  // bidi overrides, isolates
         cp == 0x2028 || cp == 0x2029;                                         // line / paragraph separators
}

}  // namespace

std::string printable(std::string_view text, std::size_t max_bytes) {
  std::string out;
  out.reserve(text.size() < max_bytes ? text.size() : max_bytes);
  std::size_t i = 0;
  while (i < text.size()) {
    if (i >= max_bytes) {
      out += "...(" + std::to_string(text.size() - i) + " more bytes)";
      break;
    }
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    if (c == '\n') { out += "\\n"; ++i; continue; }
    if (c == '\r') { out += "\\r"; ++i; continue; }
    if (c == '\t') { out += "\\t"; ++i; continue; }
    std::uint32_t cp = 0;
    const std::size_t n = c >= 0x80 ? utf8_sequence(text, i, cp) : 0;
    if (n == 0) {
      escape_byte(out, c);
      ++i;
    } else if (dangerous_code_point(cp)) {
      escape_code_point(out, cp);
      i += n;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

}  // namespace tandem::gpu
