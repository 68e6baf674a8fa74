// The environment interface (DESIGN.md section 6): given trajectories so far, a reward and
// optionally a next observation for each (multi-turn, tool calls).
#pragma once

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "actors/api/messages.hpp"
#include "actors/api/type_ids.hpp"

namespace tandem {

using environment_actor = caf::typed_actor<
    /// One env_feedback per trajectory, in the job's order. Errors: timeout, peer_lost (a
    /// scoring worker of the pool died).
    caf::replies_to<score_atom, score_job>::with<score_result>>;

}  // namespace tandem
