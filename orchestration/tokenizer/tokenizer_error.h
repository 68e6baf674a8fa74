// What can go wrong reading a tokenizer or tokenizing, as typed errors: a code and the sentence
// the user reads, naming the file, the key, the text offset or the id at fault.
#pragma once

#include <string>

#include "orchestration/result.h"

namespace tandem::tokenizer {

enum class tokenizer_errc {
  bad_file,       ///< unreadable, not JSON, a key missing or of the wrong type, a merge out of the vocabulary
  not_built,      ///< a component or option of tokenizer.json that tandem does not implement (named)
  invalid_input,  ///< text that is not UTF-8, or a character that no token, byte token or unknown token covers
  unknown_id,     ///< an id outside the vocabulary and the added tokens
};

/// The name of a code ("not_built").
const char* to_string(tokenizer_errc code);

struct tokenizer_error {
  tokenizer_errc code = tokenizer_errc::bad_file;
  std::string message;  ///< the whole sentence
};

/// A value or the reason there is none (orchestration/result.h).
template <class T>
using tokenizer_result = result_or<T, tokenizer_error>;

}  // namespace tandem::tokenizer
