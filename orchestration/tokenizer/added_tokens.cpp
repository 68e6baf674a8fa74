// Added-token matching (added_tokens.h).
#include "orchestration/tokenizer/added_tokens.h"

#include <algorithm>

namespace tandem::tokenizer {

added_token_set::added_token_set(const std::vector<added_token>& tokens, bool normalized) {
  for (const auto& t : tokens) {
    if (t.normalized != normalized) continue;
    ids_.emplace(t.content, t.id);  // a repeated content keeps its first id
    longest_ = std::max(longest_, t.content.size());
  }
}

std::vector<text_piece> added_token_set::split(std::string_view text) const {
  std::vector<text_piece> out;
  std::size_t done = 0;  // text before this is in `out`
  for (std::size_t at = 0; at < text.size() && !ids_.empty();) {
    // The longest token that starts here: try every length, the longest first.
    std::optional<std::pair<std::size_t, std::int32_t>> hit;
    for (std::size_t n = std::min(longest_, text.size() - at); n > 0; --n) {
      const auto it = ids_.find(text.substr(at, n));
      if (it != ids_.end()) {
        hit.emplace(n, it->second);
        break;
      }
    }
    if (!hit) {
      ++at;
      continue;
    }
    if (at > done) out.push_back({std::nullopt, std::string(text.substr(done, at - done))});
    out.push_back({hit->second, {}});
    at += hit->first;
    done = at;
  }
  if (done < text.size()) out.push_back({std::nullopt, std::string(text.substr(done))});
  return out;
}

}  // namespace tandem::tokenizer
