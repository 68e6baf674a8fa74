// The BPE model of a tokenizer.json: a word's characters become symbols (each character's token,
// else its bytes' <0xXX> tokens with byte fallback, else the unknown token, fused when fuse_unk),
// then adjacent pairs merge, the lowest-ranked merge first and, among equal ranks, the leftmost,
// until no adjacent pair has a merge. That order is what makes the ids equal Hugging Face's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "orchestration/tokenizer/tokenizer_error.h"
#include "orchestration/tokenizer/tokenizer_spec.h"

namespace tandem::tokenizer {

class bpe_model {
 public:
  /// The model of `spec`; a merge whose tokens or result are not in the vocabulary, or an unknown
  /// token that is not, is a bad_file error naming it (`where` names the file).
  static tokenizer_result<bpe_model> build(const bpe_spec& spec, const std::string& where);

  /// Appends the ids of `word` (valid UTF-8, non-empty) to `out`. A character that neither a
  /// token, the byte tokens nor an unknown token covers is an invalid_input error naming it and
  /// its offset in the word.
  std::optional<tokenizer_error> encode(std::string_view word, std::vector<std::int32_t>& out) const;

  const vocabulary& vocab() const { return vocab_; }

 private:
  struct merge {
    std::int32_t rank = 0;
    std::int32_t result = 0;
  };
  static std::uint64_t pair_key(std::int32_t a, std::int32_t b) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
  }
  std::optional<merge> merge_of(std::int32_t a, std::int32_t b) const;
  /// Whether every byte of the character has its <0xXX> token.
  bool covered_by_bytes(std::string_view ch) const;

  vocabulary vocab_;
  std::unordered_map<std::uint64_t, merge> merges_;
  std::optional<std::int32_t> unk_;
  std::int32_t byte_ids_[256] = {};  // the <0xXX> tokens; -1 where the vocabulary has none
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
};

}  // namespace tandem::tokenizer
