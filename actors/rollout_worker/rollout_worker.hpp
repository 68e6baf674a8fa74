// The rollout worker: one generation rank, driving a generate_engine through the rollout_actor
// interface, and the receiving end of every refit.
//
//                    check(manifest): bucket plan derived (idle only)
//   +------+ --generate(job for the live version)--> busy --done--> idle
//   | idle | --stream(v > live): begin + every bucket from the refit group--> updating(v) --commit(v)--> idle, v live
//   |      |      (a stream that fails: its ack says aborted, the bucket and why; the update is dropped)
//   +------+ <--abort(v), or a failed stream or commit: the previous version stays live------------+
//            --bump(v > live) (colocated: begin + commit, no buckets)--> idle, v live
//
//   busy (one engine call in flight): generate, check, stream, commit, bump refused (wrong_state);
//   version answered; abort(v) carried out when the call ends, and answered once the update is
//   dropped.
//   updating: generate and check refused (wrong_state); stream(w > v) drops v and starts w.
//   stream: the bytes come over config.refit_group (refit_stream.hpp), a collective every rank
//   takes part in; a stream refused for its content (stale version, no manifest, another plan)
//   is taken part in all the same, discarding every bucket, so the group stays in step. Refused
//   without taking part: no refit group, engine calls inline, bucket_bytes <= 0 (the root
//   refuses those too), busy.
//
// Every trajectory carries the version that generated it; a job for any other version than the
// live one is refused (stale_version). Engine calls run where config.execution says
// (engine_call.hpp).
#pragma once

#include <memory>
#include <string>

#include <caf/actor_system.hpp>

#include "actors/api/engine_call.hpp"
#include "actors/api/rollout_actor.hpp"
#include "actors/runtime/device_turns.hpp"
#include "gpu/comm/communicator.h"
#include "gpu/engine/generate_engine.h"
#include "gpu/engine/weight_manifest.h"

namespace tandem {

struct rollout_worker_config {
  std::string name = "rollout-0";                ///< in every reply and error
  std::shared_ptr<gpu::generate_engine> engine;  ///< required; shared with the executor thread
  /// This worker's own weight layout, which the policy's manifest must equal. The engine's bucket
  /// size must equal the coordinator's (the generate_engine contract cannot set it).
  gpu::weight_manifest manifest;
  engine_execution execution = engine_execution::off_scheduler;
  /// The refit group (a zmq_group between processes, a local_group in process), in which this
  /// worker is one of the receiving ranks. None: stream is refused. Its broadcasts block until
  /// every rank takes part, so streams need engine_execution::off_scheduler (inline, stream is
  /// refused).
  std::shared_ptr<gpu::communicator> refit_group;
  int refit_root = 0;  ///< the policy root's rank in refit_group
  /// A colocated member's device turns (shared with its policy worker): a generate job takes the
  /// generation turn first. None: the engine has its device alone.
  std::shared_ptr<device_turns> turns;
};

/// Spawns a rollout worker (an event-based actor; engine calls per config.execution). A config
/// without an engine spawns an actor that quits at once with invalid_config.
rollout_actor spawn_rollout_worker(caf::actor_system& sys, rollout_worker_config config);

}  // namespace tandem
