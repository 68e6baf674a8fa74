// Scoring functions an environment worker runs on one trajectory, and the adapter that makes one
// from a single-turn reward on the generated tokens. Which reward a run uses is the engine
// factory's choice (actors/runtime/engine_factory.hpp reward_for, by env.name).
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include <caf/expected.hpp>

#include "actors/api/messages.hpp"

namespace tandem {

/// Scores one trajectory so far: a reward, and for multi-turn tasks the next observation, or the
/// error that stops the step (a reward process that failed; the worker adds which trajectory).
/// Called on an environment worker's thread; must be thread-safe when shared by several workers.
using scoring_function = std::function<caf::expected<env_feedback>(const trajectory&)>;

/// A reward of one response from its generated tokens (the prompt excluded).
using token_reward = std::function<double(std::span<const std::int32_t> generated)>;

/// The scoring function of a single-turn task: `reward` of the trajectory's generated tokens,
/// done, never a next observation. `reward` must be thread-safe, as the scoring function is.
scoring_function single_turn(token_reward reward);

}  // namespace tandem
