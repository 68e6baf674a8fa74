// Tokenizer error codes (tokenizer_error.h).
#include "orchestration/tokenizer/tokenizer_error.h"

namespace tandem::tokenizer {

const char* to_string(tokenizer_errc code) {
  switch (code) {
    case tokenizer_errc::bad_file: return "bad_file";
    case tokenizer_errc::not_built: return "not_built";
    case tokenizer_errc::invalid_input: return "invalid_input";
    case tokenizer_errc::unknown_id: return "unknown_id";
  }
  return "unknown";
}

}  // namespace tandem::tokenizer
