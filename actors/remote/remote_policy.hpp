// The controller's stand-in for a policy worker in another process: it speaks policy_actor to the
// driver and the refit coordinator, and control messages to its worker through the bridge.
//
//   request (logprobs, train, stream) --the job itself, numbered--> frame to the worker; the promise waits
//   (rmt_in, reply or error frame) --the answer, named for this proxy--> the waiting promise
//
// One request of each kind may be in flight (a second is refused with wrong_state). manifest is
// answered once the worker pushed its manifest (policy rank 0 does at start-up). version is the
// last version the worker reported. Weight bytes never pass through the controller: stream has
// the worker broadcast them over its refit group. Replies nobody waits for (after a deadline
// passed) are dropped and logged. Deadlines are the requesters'.
#pragma once

#include <caf/actor_system.hpp>

#include "actors/api/policy_actor.hpp"
#include "actors/remote/remote_messages.hpp"

namespace tandem {

using remote_policy_actor = policy_actor::extend<caf::reacts_to<rmt_in_atom, control::message>>;

remote_policy_actor spawn_remote_policy(caf::actor_system& sys, remote_target target);

}  // namespace tandem
