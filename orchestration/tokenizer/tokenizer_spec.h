// What a Hugging Face tokenizer.json says, read into plain structs (tokenizer_json.cpp parses
// it). Only the components Gemma's tokenizers use are read; any other component, option or
// pattern kind is refused by name (not_built), never ignored:
//
//   normalizer      null | Replace (string pattern) | Prepend | Sequence of those
//   pre_tokenizer   null | Split (string pattern, any behaviour, not inverted) | Sequence of Splits
//   model           BPE: vocab, merges (either spelling), unk_token, fuse_unk, byte_fallback,
//                   ignore_merges; no dropout, no continuing_subword_prefix / end_of_word_suffix
//   added_tokens    id, content, special, normalized (lstrip / rstrip / single_word must be false)
//   post_processor  null | TemplateProcessing (its single-sequence template)
//   decoder         null | Replace | ByteFallback | Fuse | Strip | Sequence of those
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tandem::tokenizer {

/// A string-keyed map that looks up string_views without building a string.
struct string_hash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using vocabulary = std::unordered_map<std::string, std::int32_t, string_hash, std::equal_to<>>;

/// One step of the normalizer.
struct normalizer_step {
  enum class kind { replace, prepend } what = kind::replace;
  std::string pattern;  ///< replace: every occurrence, left to right
  std::string content;  ///< replace: the replacement; prepend: the prefix (only of non-empty text)
};

/// How a Split pre-tokenizer treats the pattern's occurrences.
enum class split_behavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };

struct split_step {
  std::string pattern;  ///< a literal string
  split_behavior behavior = split_behavior::isolated;
};

/// One step of the decoder.
struct decoder_step {
  enum class kind { replace, byte_fallback, fuse, strip } what = kind::fuse;
  std::string pattern;  ///< replace: in every token
  std::string content;  ///< replace: the replacement; strip: the character removed
  std::int64_t start = 0;  ///< strip: at most this many from each token's start
  std::int64_t stop = 0;   ///< strip: at most this many from each token's end
};

struct added_token {
  std::int32_t id = 0;
  std::string content;
  bool special = false;     ///< left out of decode with skip_special_tokens
  bool normalized = false;  ///< matched in the normalized text (else in the raw text)
};

struct bpe_spec {
  vocabulary vocab;
  std::vector<std::pair<std::string, std::string>> merges;  ///< by rank
  std::optional<std::string> unk_token;
  bool fuse_unk = false;
  bool byte_fallback = false;
  bool ignore_merges = false;  ///< a word that is itself in the vocabulary is one token
};

/// One piece of the single-sequence template: the sequence, or fixed ids.
struct template_piece {
  bool sequence = false;
  std::vector<std::int32_t> ids;  ///< when not the sequence
};

struct tokenizer_spec {
  std::vector<normalizer_step> normalizer;
  std::vector<split_step> pre_tokenizer;
  bpe_spec model;
  std::vector<added_token> added_tokens;
  std::vector<template_piece> single_template;  ///< empty: no post-processor (the sequence alone)
  std::vector<decoder_step> decoder;            ///< empty: no decoder (tokens joined by spaces)
  bool has_decoder = false;
};

}  // namespace tandem::tokenizer
