// Gemma 4's chat format for text conversations, built in: a conversation of system, user and
// model turns as the text a Gemma 4 instruction-tuned checkpoint was trained on.
//
//   <bos>
//   [<|turn>system\n [<|think|>\n] SYSTEM <turn|>\n]     when the first message is the system's,
//                                                        or thinking is on
//   (<|turn>ROLE\n CONTENT <turn|>\n)*                    ROLE: user, or model for assistant/model
//   [<|turn>model\n [<|channel>thought\n<channel|>]]      the generation prompt; the empty thought
//                                                        channel when thinking is off
//
// System and user contents are trimmed of leading and trailing white space (Python's definition:
// the Unicode white-space characters). A model turn's content loses its thought channels first:
// every `<|channel>...<channel|>` span, and an unclosed `<|channel>...` up to the next
// `<channel|>` or the end, is removed, then the rest is trimmed. This equals Google's Gemma 4 chat
// template (the revision that writes `<|think|>` on its own line) on every text conversation;
// tests/data/tokenizer/chat/ holds transformers' renderings of that template, and
// tools/reference/check_chat_format.py compares the format with any checkpoint's own template.
// Tool calls, tool responses and images are not part of it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "orchestration/data/prompt_dataset.h"
#include "orchestration/tokenizer/tokenizer.h"

namespace tandem::data {

struct chat_options {
  bool add_generation_prompt = true;  ///< end with the model's turn opened
  bool enable_thinking = false;       ///< the <|think|> system marker; no empty thought channel
};

/// The text of `messages` in Gemma 4's chat format. Refused: an empty conversation, a role other
/// than system, user, assistant or model, and a system message that is not the first.
data_result<std::string> render_chat(std::span<const chat_message> messages, const chat_options& options);

/// `text` without Python's white space at either end (str.strip()).
std::string_view python_strip(std::string_view text);

/// A model turn's content without its thought channels, stripped (see above).
std::string without_thoughts(std::string_view text);

/// The special tokens the format writes (the thinking marker only when thinking is on), for
/// checking that a tokenizer knows each as one token.
std::span<const std::string_view> chat_tokens(const chat_options& options);

/// Why `t` cannot tokenize the format: it does not read one of the format's tokens as a single
/// token of its own (a tokenizer that is not Gemma 4's), named; none when it can. Check once per
/// tokenizer before chat_ids.
std::optional<std::string> chat_token_problem(const tokenizer::tokenizer& t, const chat_options& options);

/// The ids of `messages` in the format through `t` (the rendering holds its own <bos>), for a
/// tokenizer chat_token_problem() accepted.
data_result<std::vector<std::int32_t>> chat_ids(const tokenizer::tokenizer& t, std::span<const chat_message> messages,
                                                const chat_options& options);

}  // namespace tandem::data
