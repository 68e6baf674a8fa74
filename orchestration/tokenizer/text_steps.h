// The string steps around the model, as tokenizer.json defines them (tokenizer_spec.h): the
// normalizer, the Split pre-tokenizer and the decoder.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "orchestration/tokenizer/tokenizer_spec.h"

namespace tandem::tokenizer {

/// `text` after every normalizer step in order (Replace: every occurrence left to right;
/// Prepend: only before non-empty text).
std::string normalize(const std::vector<normalizer_step>& steps, std::string_view text);

/// The pieces of `text` after every Split step in order; empty pieces are dropped. A Split
/// cuts each piece at every occurrence of its pattern and treats the occurrences as its
/// behaviour says (removed; isolated; merged with the piece before or after, a run's first
/// occurrence only; contiguous runs of occurrences and of other text as one piece each).
std::vector<std::string> pre_tokenize(const std::vector<split_step>& steps, std::string_view text);

/// The text of `tokens` after every decoder step in order, joined (Replace in every token;
/// ByteFallback: runs of <0xXX> tokens become their bytes, or one U+FFFD per byte when those are
/// not UTF-8; Fuse: one token; Strip: at most start / stop of the character from each token's
/// ends).
std::string decode_tokens(const std::vector<decoder_step>& steps, std::vector<std::string> tokens);

}  // namespace tandem::tokenizer
