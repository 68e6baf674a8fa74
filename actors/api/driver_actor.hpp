// The driver's interface: the RL loop, one step per request.
#pragma once

#include <string>

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "actors/api/messages.hpp"
#include "actors/api/type_ids.hpp"

namespace tandem {

using driver_actor = caf::typed_actor<
    /// Runs one RL step (generate, score, logprobs, train, refit) and reports it. Errors:
    /// wrong_state (a step is running), peer_lost (a member was declared lost, now or before),
    /// and whatever a worker answered, with the worker's name.
    caf::replies_to<step_atom>::with<step_report>,
    /// Runs one step of the supervised warm-up (the next examples: logprobs, the cross-entropy
    /// train step, refit) and reports it (step_report::supervised). Errors as a step's, and
    /// invalid_config when the driver has no warm-up examples.
    caf::replies_to<sft_step_atom>::with<step_report>,
    /// Where the driver stands between steps, for a checkpoint (driver_snapshot). Errors:
    /// wrong_state (a step is running).
    caf::replies_to<snapshot_atom>::with<driver_snapshot>,
    /// The supervisor declared a worker lost: (name, reason). Fails the running step with
    /// peer_lost naming it, and every later step.
    caf::reacts_to<member_lost_atom, std::string, std::string>>;

}  // namespace tandem
