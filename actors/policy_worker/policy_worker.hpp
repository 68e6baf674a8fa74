// The policy worker: one training rank, driving a train_engine through the policy_actor interface.
//
//   idle --logprobs / train / stream--> busy (one engine call in flight) --call done--> idle
//   busy: logprobs, train, stream refused (wrong_state); manifest, version answered
//   train ok: version v -> v + 1;  train failed: gradients dropped, version and weights unchanged
//   stream(v): as the refit group's root, broadcasts every bucket of v (refit_stream.hpp), the
//   only way weight bytes leave the rank; one refused for its content (stale version, bucket
//   count) still sends the refused opening, so the rollout workers waiting in the group stop
//
// The weight version starts at config.initial_version (the checkpoint) and grows by one with every
// successful optimizer step. Engine calls run where config.execution says (engine_call.hpp).
#pragma once

#include <memory>
#include <string>

#include <caf/actor_system.hpp>

#include "actors/api/engine_call.hpp"
#include "actors/api/policy_actor.hpp"
#include "gpu/comm/communicator.h"
#include "gpu/engine/train_engine.h"

namespace tandem {

struct policy_worker_config {
  std::string name = "policy-0";                  ///< in every reply and error
  std::shared_ptr<gpu::train_engine> engine;      ///< required; shared with the executor thread
  weight_version initial_version = 0;
  engine_execution execution = engine_execution::off_scheduler;
  /// The refit group (a zmq_group between processes, a local_group in process); this worker is
  /// its rank 0, the root. None: stream is refused. Its broadcasts block until every rank takes
  /// part, so streams need engine_execution::off_scheduler (inline, stream is refused).
  std::shared_ptr<gpu::communicator> refit_group;
};

/// Spawns a policy worker (an event-based actor; engine calls per config.execution). A config
/// without an engine spawns an actor that quits at once with invalid_config.
policy_actor spawn_policy_worker(caf::actor_system& sys, policy_worker_config config);

}  // namespace tandem
