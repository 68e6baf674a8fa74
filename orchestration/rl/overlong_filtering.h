// DAPO overlong filtering: a truncated sample (generation hit the length limit) is left out of the
// loss by a loss multiplier of 0, so an unfinished answer is neither rewarded nor punished. Off,
// every sample keeps multiplier 1.
#pragma once

#include <span>
#include <vector>

#include "orchestration/rl/sample_outcome.h"

namespace tandem::rl {

/// One loss multiplier per sample: 0 for a truncated sample when `enabled`, 1 otherwise.
std::vector<double> overlong_loss_multipliers(bool enabled, std::span<const sample_outcome> samples);

}  // namespace tandem::rl
