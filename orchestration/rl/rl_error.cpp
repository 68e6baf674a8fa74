// The names of the RL step errors.
#include "orchestration/rl/rl_error.h"

namespace tandem::rl {

const char* to_string(rl_errc code) {
  switch (code) {
    case rl_errc::invalid_input: return "invalid_input";
    case rl_errc::invalid_setting: return "invalid_setting";
    case rl_errc::count_overflow: return "count_overflow";
    case rl_errc::does_not_divide: return "does_not_divide";
    case rl_errc::out_of_rounds: return "out_of_rounds";
    case rl_errc::wrong_state: return "wrong_state";
  }
  return "unknown";
}

}  // namespace tandem::rl
