// Gemma 4's chat format for text conversations (chat_format.h).
#include "orchestration/data/chat_format.h"

#include <array>
#include <cstdint>

namespace tandem::data {
namespace {

constexpr std::string_view turn_open = "<|turn>", turn_close = "<turn|>\n";
constexpr std::string_view channel_open = "<|channel>", channel_close = "<channel|>";

/// The code point at text[at] and its length in bytes; a malformed byte counts as itself (it is
/// never white space, so it ends the strip; the tokenizer refuses the text later).
std::pair<std::uint32_t, std::size_t> code_point(std::string_view text, std::size_t at) {
  const auto b = static_cast<unsigned char>(text[at]);
  std::size_t n = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
  if (n == 0 || at + n > text.size()) return {0xFFFFFFFFu, 1};
  std::uint32_t c = n == 1 ? b : b & (0x7F >> n);
  for (std::size_t i = 1; i < n; ++i) {
    const auto x = static_cast<unsigned char>(text[at + i]);
    if ((x >> 6) != 0x2) return {0xFFFFFFFFu, 1};
    c = (c << 6) | (x & 0x3F);
  }
  return {c, n};
}

/// Python's str.isspace() for one code point.
bool python_space(std::uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/// The start of the last character of text[0, end).
std::size_t previous_start(std::string_view text, std::size_t end) {
  std::size_t at = end - 1;
  for (std::size_t back = 0; back < 3 && at > 0 && (static_cast<unsigned char>(text[at]) >> 6) == 0x2; ++back) --at;
  return code_point(text, at).second == end - at ? at : end - 1;
}

}  // namespace

std::string_view python_strip(std::string_view text) {
  std::size_t begin = 0, end = text.size();
  while (begin < end) {
    const auto [c, n] = code_point(text, begin);
    if (!python_space(c)) break;
    begin += n;
  }
  while (end > begin) {
    const std::size_t at = previous_start(text, end);
    if (!python_space(code_point(text, at).first)) break;
    end = at;
  }
  return text.substr(begin, end - begin);
}

std::string without_thoughts(std::string_view text) {
  // Split on the closing marker; of each part, keep what precedes its first opening marker.
  std::string kept;
  std::size_t from = 0;
  while (true) {
    const std::size_t close = text.find(channel_close, from);
    const std::string_view part = text.substr(from, close == std::string_view::npos ? std::string_view::npos : close - from);
    kept += part.substr(0, part.find(channel_open));
    if (close == std::string_view::npos) break;
    from = close + channel_close.size();
  }
  return std::string(python_strip(kept));
}

std::span<const std::string_view> chat_tokens(const chat_options& options) {
  static constexpr std::array<std::string_view, 6> tokens{"<bos>", "<|turn>", "<turn|>", "<|channel>", "<channel|>", "<|think|>"};
  return std::span<const std::string_view>(tokens).first(options.enable_thinking ? 6 : 5);
}

data_result<std::string> render_chat(std::span<const chat_message> messages, const chat_options& options) {
  if (messages.empty()) return data_error{"a conversation needs at least one message"};
  if (auto problem = conversation_problem(messages)) return data_error{std::move(*problem)};
  std::string out = "<bos>";
  std::size_t first = 0;
  const bool system = messages[0].role == "system";
  if (system || options.enable_thinking) {
    out += turn_open;
    out += "system\n";
    if (options.enable_thinking) out += "<|think|>\n";
    if (system) {
      out += python_strip(messages[0].content);
      first = 1;
    }
    out += turn_close;
  }
  for (std::size_t i = first; i < messages.size(); ++i) {
    const bool model = messages[i].role == "assistant" || messages[i].role == "model";
    out += turn_open;
    out += model ? "model" : messages[i].role;
    out += '\n';
    if (model)
      out += without_thoughts(messages[i].content);
    else
      out += python_strip(messages[i].content);
    out += turn_close;
  }
  if (options.add_generation_prompt) {
    out += turn_open;
    out += "model\n";
    if (!options.enable_thinking) {
      out += channel_open;
      out += "thought\n";
      out += channel_close;
    }
  }
  return out;
}

std::optional<std::string> chat_token_problem(const tokenizer::tokenizer& t, const chat_options& options) {
  for (const std::string_view token : chat_tokens(options)) {
    const auto id = t.token_to_id(token);
    const auto ids = t.encode(token, false);
    if (!id || !ids || *ids != std::vector<std::int32_t>{*id}) {
      std::string all;
      for (const std::string_view x : chat_tokens(options)) all += (all.empty() ? "" : " ") + std::string(x);
      return "the tokenizer (" + std::string(t.format()) + ") has no " + std::string(token) +
             " token, which Gemma 4's chat format needs (" + all + ")";
    }
  }
  return std::nullopt;
}

data_result<std::vector<std::int32_t>> chat_ids(const tokenizer::tokenizer& t, std::span<const chat_message> messages,
                                                const chat_options& options) {
  auto text = render_chat(messages, options);
  if (!text) return text.error();
  auto ids = t.encode(text.value(), false);
  if (!ids) return data_error{ids.error().message};
  return std::move(ids.value());
}

}  // namespace tandem::data
