// The policy worker: one training rank, driving a train_engine through the policy_actor interface.
//
//   idle --logprobs / train / stream--> busy (one engine call in flight) --call done--> idle
//   busy: logprobs, train, stream refused (wrong_state); manifest, version answered
//
// A step's data, as the rank holds it (step_batch.hpp):
//
//   empty --logprobs(step s, v) ok--> holding(s) --train(s, v) ok--> empty, version v -> v + 1
//   holding(s) --logprobs(step s')--> holding(s')   (an unfinished step's batch is replaced)
//   empty --train--> refused (wrong_state: no logprobs for it); a train of another step: invalid_config
//   train failed before any optimizer step: gradients dropped, version and weights unchanged, empty
//   train failed after k >= 1 of its optimizer steps: damaged (the weights match no version):
//     every later logprobs and train is refused (engine_failure) naming why; resume from a checkpoint
//   stream(v): as the refit group's root, broadcasts every bucket of v (refit_stream.hpp), the
//   only way weight bytes leave the rank; one refused for its content (stale version, bucket
//   count) still sends the refused opening, so the rollout workers waiting in the group stop
//
// The weight version starts at config.initial_version (the checkpoint) and grows by one with every
// successful train job (one or more optimizer steps), whatever its objective (the RL phase's
// policy-gradient loss or the supervised warm-up's cross-entropy). Engine calls run where config.execution says (engine_call.hpp).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <caf/actor_system.hpp>

#include "actors/api/engine_call.hpp"
#include "actors/api/policy_actor.hpp"
#include "actors/runtime/device_turns.hpp"
#include "gpu/comm/communicator.h"
#include "gpu/engine/train_engine.h"
#include "gpu/ops/pg_loss.h"

namespace tandem {

struct policy_worker_config {
  std::string name = "policy-0";                  ///< in every reply and error
  std::shared_ptr<gpu::train_engine> engine;      ///< required; shared with the executor thread
  /// The frozen reference policy (the initial weights, never trained): its logprobs feed the KL
  /// term. None: a logprobs job asking for them is refused (invalid_config).
  std::shared_ptr<gpu::train_engine> reference;
  weight_version initial_version = 0;
  /// The loss: the recipe's (runtime/recipe_settings.hpp loss_settings), as the driver's is.
  gpu::ops::pg_loss_settings loss;
  /// The peak learning rate of each objective's train jobs (policy.optimizer.lr for the
  /// policy-gradient loss, sft.lr for the warm-up's cross-entropy), set on the engine before each
  /// job. None: the engine keeps the one it was created with, for every job.
  struct learning_rates {
    double policy_gradient = 0;
    double cross_entropy = 0;
  };
  std::optional<learning_rates> lr;
  engine_execution execution = engine_execution::off_scheduler;
  /// The refit group (a zmq_group between processes, a local_group in process); this worker is
  /// its rank 0, the root. None: stream is refused. Its broadcasts block until every rank takes
  /// part, so streams need engine_execution::off_scheduler (inline, stream is refused).
  std::shared_ptr<gpu::communicator> refit_group;
  /// A colocated member's device turns (shared with its rollout worker): every engine call takes
  /// the training turn first, and each train report carries the turns' figures. None: the
  /// engine has its device alone.
  std::shared_ptr<device_turns> turns;
};

/// Spawns a policy worker (an event-based actor; engine calls per config.execution). A config
/// without an engine spawns an actor that quits at once with invalid_config.
policy_actor spawn_policy_worker(caf::actor_system& sys, policy_worker_config config);

}  // namespace tandem
