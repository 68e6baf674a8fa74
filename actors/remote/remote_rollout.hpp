// The controller's stand-in for a rollout worker in another process: it speaks rollout_actor to
// the driver and the refit coordinator, and control messages to its worker through the bridge.
//
//   generate  --generate_request-->  worker  --generate_result-->  trajectories (assembled with the job, as a local worker does)
//   check     --manifest_check-->            --manifest_result-->  manifest_accepted
//   stream(v) --refit_begin(broadcast)-->    --refit_ack(staged)-->    the stream's outcome: staged, or
//                                                                      aborted (bucket, reason), with the checksum results
//   commit(v) --refit_commit-->              --refit_ack(committed)--> v is live
//   abort(v)  --refit_abort-->               --refit_ack(aborted)-->   the live version
//   bump(v)   --refit_begin(colocated)-->    --refit_ack(bumped)-->    v is live
//
// One request of each kind may be in flight (a second is refused with wrong_state). The worker
// receives the buckets from the policy root over the refit group, never through the controller.
// version is the last live version the worker reported.
// Replies nobody waits for are dropped and logged. Deadlines are the requesters'.
#pragma once

#include <caf/actor_system.hpp>

#include "actors/api/rollout_actor.hpp"
#include "actors/remote/remote_messages.hpp"

namespace tandem {

using remote_rollout_actor = rollout_actor::extend<caf::reacts_to<rmt_in_atom, control::message>>;

remote_rollout_actor spawn_remote_rollout(caf::actor_system& sys, remote_target target);

}  // namespace tandem
