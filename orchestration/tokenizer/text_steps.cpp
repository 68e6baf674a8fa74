// Normalizer, pre-tokenizer and decoder steps (text_steps.h).
#include "orchestration/tokenizer/text_steps.h"

#include <utility>

#include "orchestration/tokenizer/utf8.h"

namespace tandem::tokenizer {
namespace {

std::string replace_all(std::string_view text, const std::string& pattern, const std::string& content) {
  std::string out;
  out.reserve(text.size());
  std::size_t at = 0;
  for (std::size_t hit = text.find(pattern); hit != std::string_view::npos; hit = text.find(pattern, at)) {
    out.append(text.substr(at, hit - at));
    out.append(content);
    at = hit + pattern.size();
  }
  out.append(text.substr(at));
  return out;
}

/// `text` cut into (piece, is_occurrence) at every occurrence of `pattern`, empty pieces left out.
std::vector<std::pair<std::string_view, bool>> cut(std::string_view text, const std::string& pattern) {
  std::vector<std::pair<std::string_view, bool>> out;
  std::size_t at = 0;
  for (std::size_t hit = text.find(pattern); hit != std::string_view::npos; hit = text.find(pattern, at)) {
    if (hit > at) out.emplace_back(text.substr(at, hit - at), false);
    out.emplace_back(text.substr(hit, pattern.size()), true);
    at = hit + pattern.size();
  }
  if (at < text.size()) out.emplace_back(text.substr(at), false);
  return out;
}

/// One Split step on one piece; pieces are views into `text`, so merging is widening.
std::vector<std::string> split_piece(const split_step& step, std::string_view text) {
  const auto parts = cut(text, step.pattern);
  std::vector<std::string_view> kept;
  const auto widen_last = [&](std::string_view next) {  // kept.back() and next are adjacent in text
    kept.back() = std::string_view(kept.back().data(), kept.back().size() + next.size());
  };
  bool previous = false;  // whether the previous part was an occurrence
  switch (step.behavior) {
    case split_behavior::removed:
      for (const auto& [p, hit] : parts)
        if (!hit) kept.push_back(p);
      break;
    case split_behavior::isolated:
      for (const auto& [p, hit] : parts) kept.push_back(p);
      break;
    case split_behavior::merged_with_previous:
      for (const auto& [p, hit] : parts) {
        if (hit && !previous && !kept.empty()) widen_last(p);
        else kept.push_back(p);
        previous = hit;
      }
      break;
    case split_behavior::merged_with_next: {
      // Right to left: an occurrence joins the piece after it (a run's last occurrence only).
      std::vector<std::string_view> reversed;
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
        const auto& [p, hit] = *it;
        if (hit && !previous && !reversed.empty()) reversed.back() = std::string_view(p.data(), p.size() + reversed.back().size());
        else reversed.push_back(p);
        previous = hit;
      }
      kept.assign(reversed.rbegin(), reversed.rend());
      break;
    }
    case split_behavior::contiguous:
      for (std::size_t i = 0; i < parts.size(); ++i) {
        if (i > 0 && parts[i].second == previous) widen_last(parts[i].first);
        else kept.push_back(parts[i].first);
        previous = parts[i].second;
      }
      break;
  }
  std::vector<std::string> out;
  for (const auto& p : kept)
    if (!p.empty()) out.emplace_back(p);
  return out;
}

/// "<0xXX>" -> the byte; none for any other token.
std::optional<unsigned char> byte_token(const std::string& t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return std::nullopt;
  unsigned v = 0;
  for (int i = 3; i < 5; ++i) {
    const char c = t[static_cast<std::size_t>(i)];
    v <<= 4;
    if (c >= '0' && c <= '9') v |= static_cast<unsigned>(c - '0');
    else if (c >= 'A' && c <= 'F') v |= static_cast<unsigned>(c - 'A' + 10);
    else if (c >= 'a' && c <= 'f') v |= static_cast<unsigned>(c - 'a' + 10);
    else return std::nullopt;
  }
  return static_cast<unsigned char>(v);
}

std::vector<std::string> byte_fallback(std::vector<std::string> tokens) {
  std::vector<std::string> out;
  std::string bytes;
  std::size_t count = 0;
  const auto flush = [&] {
    if (count == 0) return;
    if (!first_invalid_utf8(bytes)) out.push_back(bytes);
    else
      for (std::size_t i = 0; i < count; ++i) out.emplace_back("\xEF\xBF\xBD");  // U+FFFD per byte
    bytes.clear();
    count = 0;
  };
  for (auto& t : tokens) {
    if (const auto b = byte_token(t)) {
      bytes.push_back(static_cast<char>(*b));
      ++count;
    } else {
      flush();
      out.push_back(std::move(t));
    }
  }
  flush();
  return out;
}

std::string strip(const std::string& token, const std::string& ch, std::int64_t start, std::int64_t stop) {
  std::size_t begin = 0, end = token.size();
  if (ch.empty()) return token;
  for (std::int64_t i = 0; i < start && end - begin >= ch.size() && token.compare(begin, ch.size(), ch) == 0; ++i) begin += ch.size();
  for (std::int64_t i = 0; i < stop && end - begin >= ch.size() && token.compare(end - ch.size(), ch.size(), ch) == 0; ++i) end -= ch.size();
  return token.substr(begin, end - begin);
}

}  // namespace

std::string normalize(const std::vector<normalizer_step>& steps, std::string_view text) {
  std::string s(text);
  for (const auto& step : steps) {
    if (step.what == normalizer_step::kind::replace) s = replace_all(s, step.pattern, step.content);
    else if (!s.empty()) s = step.content + s;
  }
  return s;
}

std::vector<std::string> pre_tokenize(const std::vector<split_step>& steps, std::string_view text) {
  std::vector<std::string> pieces;
  if (!text.empty()) pieces.emplace_back(text);
  for (const auto& step : steps) {
    std::vector<std::string> next;
    for (const auto& p : pieces)
      for (auto& q : split_piece(step, p)) next.push_back(std::move(q));
    pieces = std::move(next);
  }
  return pieces;
}

std::string decode_tokens(const std::vector<decoder_step>& steps, std::vector<std::string> tokens) {
  for (const auto& step : steps) {
    switch (step.what) {
      case decoder_step::kind::replace:
        for (auto& t : tokens) t = replace_all(t, step.pattern, step.content);
        break;
      case decoder_step::kind::byte_fallback:
        tokens = byte_fallback(std::move(tokens));
        break;
      case decoder_step::kind::fuse: {
        std::string all;
        for (const auto& t : tokens) all += t;
        tokens.assign(1, std::move(all));
        break;
      }
      case decoder_step::kind::strip:
        for (auto& t : tokens) t = strip(t, step.content, step.start, step.stop);
        break;
    }
  }
  std::string out;
  for (const auto& t : tokens) out += t;
  return out;
}

}  // namespace tandem::tokenizer
