// What can go wrong in the RL step computations, as typed errors: a code and the sentence the user
// reads, which names the input or setting at fault ("rewards[7] is nan", "dynamic sampling ran out
// of rounds: ..."). Nothing in orchestration/rl/ asserts or exits on bad input; it returns these.
#pragma once

#include <string>
#include <utility>

#include "orchestration/result.h"

namespace tandem::rl {

enum class rl_errc {
  invalid_input,    ///< sizes disagree, a value is not finite, a group index is out of range
  invalid_setting,  ///< a setting cannot be used (source_max <= source_min, clip_low > clip_high)
  count_overflow,   ///< a count derived from the settings does not fit in int64
  does_not_divide,  ///< the step's samples do not split into whole global batches
  out_of_rounds,    ///< dynamic sampling used its last generation round without filling the batch
  wrong_state,      ///< a call the dynamic-sampling cache does not take in its present state
};

/// The name of a code ("out_of_rounds").
const char* to_string(rl_errc code);

struct rl_error {
  rl_errc code = rl_errc::invalid_input;
  std::string message;  ///< the whole sentence, naming what was wrong
};

/// A value or the reason there is none (orchestration/result.h).
template <class T>
using rl_result = result_or<T, rl_error>;

}  // namespace tandem::rl
