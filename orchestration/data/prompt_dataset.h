// A prompt dataset: JSON lines, one record per line, each a prompt and the answer its reward is
// checked against. A record holds exactly one of
//
//   "prompt": "What is 2 + 3?"                         plain text
//   "messages": [{"role": "user", "content": "..."}]   a conversation (roles: system, user,
//                                                      assistant, model; the last is not the model's)
//   "input_ids": [2, 105, 2364, ...]                   a pre-tokenized prompt (ids >= 0)
//
// and "answer": a string. Other keys are allowed and not read. Blank lines are skipped; a UTF-8
// byte-order mark before the first record is allowed. Anything else is an error naming the file,
// the line and what is wrong ("train.jsonl:17: \"answer\" must be a string, got number 42").
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "orchestration/result.h"

namespace tandem::data {

struct data_error {
  std::string message;  ///< the whole sentence, with the file and line
};

template <class T>
using data_result = result_or<T, data_error>;

struct chat_message {
  std::string role;  ///< system, user, assistant or model
  std::string content;
  bool operator==(const chat_message&) const = default;
};

struct prompt_record {
  std::size_t line = 0;                         ///< 1-based, in its file
  std::optional<std::string> prompt;            ///< a plain-text record
  std::vector<chat_message> messages;           ///< a conversation record (non-empty then)
  std::optional<std::vector<std::int32_t>> input_ids;  ///< a pre-tokenized record
  std::string answer;
};

/// The first fault of a conversation's roles, for the dataset reader and the chat format alike:
/// "messages[2].role must be system, user, assistant or model, got \"tool\"", "messages[1]: a
/// system message must come first"; none when every role is good (an empty list included).
std::optional<std::string> conversation_problem(std::span<const chat_message> messages);

/// The records of `text`; `where` names it in errors (a path).
data_result<std::vector<prompt_record>> parse_prompt_dataset(std::string_view text, const std::string& where);

/// The records of the file at `file` (at least one).
data_result<std::vector<prompt_record>> read_prompt_dataset(const std::filesystem::path& file);

}  // namespace tandem::data
