// The validation actor's interface: one validation pass over the held-out prompts per request
// (actors/driver/validation.hpp), between RL steps.
#pragma once

#include <cstdint>
#include <string>

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "actors/api/messages.hpp"
#include "actors/api/type_ids.hpp"

namespace tandem {

using validation_actor = caf::typed_actor<
    /// (validate, version, step): generates every validation prompt greedily with `version` (live
    /// on every rollout worker), scores the responses and reports the pass after `step` steps.
    /// Errors: wrong_state (a pass is running), stale_version (a response of another version,
    /// naming the rollout worker), peer_lost (a member was declared lost, now or before), and
    /// whatever a rollout worker or the environment answered, naming it.
    caf::replies_to<validate_atom, weight_version, std::uint32_t>::with<validation_report>,
    /// The supervisor declared a member lost: (name, reason). Fails the running pass with
    /// peer_lost naming it, and every later pass.
    caf::reacts_to<member_lost_atom, std::string, std::string>>;

}  // namespace tandem
