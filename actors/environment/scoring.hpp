// Scoring functions an environment worker runs on one trajectory, and the built-in fake
// environment of the runtime tests.
#pragma once

#include <functional>

#include "actors/api/messages.hpp"

namespace tandem {

/// Scores one trajectory so far: a reward, and for multi-turn tasks the next observation.
/// Called on an environment worker's thread; must be thread-safe when shared by several workers.
using scoring_function = std::function<env_feedback(const trajectory&)>;

/// The fake environment of the runtime tests (single-turn, deterministic): reward 1 when the last
/// generated token is even, 0 when it is odd or nothing was generated; never a next observation.
env_feedback parity_reward(const trajectory& t);

}  // namespace tandem
