// The added tokens of a tokenizer.json, found in text before the model sees it: at each point the
// leftmost match wins and, of the matches that start there, the longest. Tokens with
// normalized: false are found in the raw text; those with normalized: true in each remaining
// piece after the normalizer ran.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "orchestration/tokenizer/tokenizer_spec.h"

namespace tandem::tokenizer {

/// A piece of text: an added token's id, or text for the next stage.
struct text_piece {
  std::optional<std::int32_t> token;
  std::string text;  ///< empty when token
};

class added_token_set {
 public:
  added_token_set() = default;
  explicit added_token_set(const std::vector<added_token>& tokens, bool normalized);

  /// `text` cut at every match, in order; text between matches (never empty) stays text.
  std::vector<text_piece> split(std::string_view text) const;
  bool empty() const { return ids_.empty(); }

 private:
  std::map<std::string, std::int32_t, std::less<>> ids_;  // content -> id
  std::size_t longest_ = 0;
};

}  // namespace tandem::tokenizer
