// A checkpoint's tokenizer: its Hugging Face tokenizer.json, read natively, or, for checkpoints
// that ship only a SentencePiece tokenizer.model, that (sentencepiece_model.h). The ids equal
// transformers' tokenizer's for the components it supports (tokenizer_spec.h lists them; anything
// else is refused when the file is read, never ignored).
//
//   encode: text --added tokens (raw)--> pieces --normalizer--> --added tokens (normalized)-->
//           --Split pre-tokenizer--> words --BPE--> ids  [--template: <bos> ... when asked]
//   decode: ids --> tokens (added tokens' text; special ones left out when asked) --decoder--> text
//
// Two places differ from the Python library on purpose, both on input it would silently damage:
// text that is not UTF-8 and a character no token covers (no byte tokens, no unknown token) are
// errors here; the library cannot take the first and drops the second. An id outside the
// vocabulary is an error in decode (the library skips it).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "orchestration/tokenizer/added_tokens.h"
#include "orchestration/tokenizer/bpe_model.h"
#include "orchestration/tokenizer/sentencepiece_model.h"
#include "orchestration/tokenizer/tokenizer_error.h"
#include "orchestration/tokenizer/tokenizer_spec.h"

namespace tandem::tokenizer {

class tokenizer {
 public:
  /// The tokenizer of a checkpoint directory: its tokenizer.json, else its tokenizer.model (with
  /// tokenizer_config.json's add_bos_token / add_eos_token when it says them; <bos> otherwise).
  /// A file is read as what its name says (a .model file as SentencePiece, any other as JSON).
  static tokenizer_result<tokenizer> load_model(const std::filesystem::path& dir_or_file);
  /// The tokenizer of the tokenizer.json at `file`.
  static tokenizer_result<tokenizer> load(const std::filesystem::path& file);
  /// The tokenizer of tokenizer.json text; `where` names it in errors.
  static tokenizer_result<tokenizer> parse(std::string_view json, const std::string& where);

  /// The ids of `text` (UTF-8); with add_special_tokens, inside the post-processor's template.
  tokenizer_result<std::vector<std::int32_t>> encode(std::string_view text, bool add_special_tokens = false) const;

  /// The text of `ids`; with skip_special_tokens, special added tokens are left out.
  tokenizer_result<std::string> decode(std::span<const std::int32_t> ids, bool skip_special_tokens = false) const;

  /// The id of a token (the vocabulary's or an added token's), if it has one.
  std::optional<std::int32_t> token_to_id(std::string_view token) const;
  /// The text of an id, if it has one.
  std::optional<std::string> id_to_token(std::int32_t id) const;
  /// One more than the largest id.
  std::int32_t vocab_size() const;
  /// Which file it was read from: "tokenizer.json" or "tokenizer.model".
  const char* format() const { return spm_ ? "tokenizer.model" : "tokenizer.json"; }

 private:
  tokenizer(tokenizer_spec spec, bpe_model model);
  tokenizer(std::shared_ptr<const sentencepiece_model> spm, bool add_bos, bool add_eos);

  std::shared_ptr<const sentencepiece_model> spm_;  // set: a tokenizer.model, the rest unused
  bool spm_bos_ = true, spm_eos_ = false;

  tokenizer_spec spec_;
  bpe_model model_;
  added_token_set raw_added_, normalized_added_;
  std::vector<std::optional<std::string>> tokens_;  // by id: the vocabulary's, overridden by added tokens
  std::vector<bool> special_;                       // by id
};

}  // namespace tandem::tokenizer
