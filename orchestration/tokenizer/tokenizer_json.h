// Reading a Hugging Face tokenizer.json into a tokenizer_spec (what it may hold: tokenizer_spec.h).
#pragma once

#include <string>
#include <string_view>

#include "orchestration/tokenizer/tokenizer_error.h"
#include "orchestration/tokenizer/tokenizer_spec.h"

namespace tandem::tokenizer {

/// The spec of the tokenizer.json text `json`; `where` names it in errors ("DIR/tokenizer.json").
/// Errors name the key path ("DIR/tokenizer.json: model.merges[12]: ...").
tokenizer_result<tokenizer_spec> parse_tokenizer_json(std::string_view json, const std::string& where);

}  // namespace tandem::tokenizer
