// A SentencePiece tokenizer.model, for checkpoints that ship no tokenizer.json: read with the
// SentencePiece library (Debian's libsentencepiece), with the ids transformers gives when it
// converts the same file (its Gemma tokenizer):
//
//   encode: text --control and unknown pieces found whole (leftmost, longest)--> the text
//           between them through SentencePiece (which finds user-defined pieces whole itself)
//           --> ids  [<bos> first when asked]
//   decode: runs of ordinary ids through SentencePiece; a control or unknown piece as its own
//           text (left out with skip_special_tokens); user-defined pieces as their text
//
// SentencePiece alone would read "<bos>" in a text as five characters and decode the unknown id
// as " \u2047 "; transformers treats them as tokens, and so does this. Text that is not UTF-8 and
// an id outside the vocabulary are errors, as in the tokenizer.json path.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "orchestration/tokenizer/added_tokens.h"
#include "orchestration/tokenizer/tokenizer_error.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace tandem::tokenizer {

class sentencepiece_model {
 public:
  /// The model of the tokenizer.model at `file`.
  static tokenizer_result<std::shared_ptr<const sentencepiece_model>> load(const std::filesystem::path& file);
  ~sentencepiece_model();

  /// The ids of `text` (UTF-8), with the model's <bos> first when add_bos (and it has one).
  tokenizer_result<std::vector<std::int32_t>> encode(std::string_view text, bool add_bos) const;
  /// The text of `ids`; with skip_special_tokens, control and unknown pieces are left out.
  tokenizer_result<std::string> decode(std::span<const std::int32_t> ids, bool skip_special_tokens) const;

  std::optional<std::int32_t> token_to_id(std::string_view token) const;
  std::optional<std::string> id_to_token(std::int32_t id) const;
  std::int32_t vocab_size() const;
  /// The model's end-of-sequence id (none: negative).
  std::int32_t eos_id() const;

 private:
  sentencepiece_model() = default;

  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  added_token_set whole_;      // control and unknown pieces, found in the raw text
  std::vector<bool> special_;  // by id: control or unknown
};

}  // namespace tandem::tokenizer
