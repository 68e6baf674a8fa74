// The refit coordinator: the manifest handshake once, then per step one versioned refit from the
// policy workers to every rollout worker (DESIGN.md section 4).
//
//   +------+ --handshake--> +-------------+ --every rollout worker accepted the manifest--> +-------+
//   | idle |                | handshaking |                                                 | ready |
//   +------+ <--failure---- +-------------+                                                 +-------+
//                                                                                  refit(v) |   ^
//                                                                                           v   | done: v live everywhere
//                                                                                      +-----------+
//                                                                                      | refitting |
//                                                                                      +-----------+
//   refitting(v) is a sequence of stages; each sends one request to every rollout worker and waits
//   for an ack from each (or its error, or the stage deadline):
//     dedicated:  stream(v) to every rollout worker and to policy rank 0 (also awaited: its
//                 stream_report) -> commit(v). The policy root broadcasts every bucket to the
//                 rollout workers over the refit group itself (refit_stream.hpp), so no weight
//                 byte passes this actor and its traffic per refit does not depend on the bucket
//                 count. Each rollout worker's stream ack carries the stream's outcome
//                 (stream_result): aborted or staged, the first failing bucket, the checksum
//                 results; with checksums on, an ack that did not match every bucket's checksum
//                 fails the refit too. A failed stream reports policy rank 0's error when it has
//                 one (a receiver only sees the root stop).
//     colocated:  bump(v)  (the rollout engines read the trainer's weights in place)
//   a stage with a failure -> aborting: abort(v) to every rollout worker, wait for every answer,
//   then back to ready with the previous version live, replying an error that names the worker
//   and the reason.
//
//   Acks of another version or stage, or from a worker that already acked, are dropped and
//   counted (refit_report::dropped_acks). Requests that do not fit the state are refused with
//   wrong_state. Every wait has a deadline on CAF's clock (config.timeout).
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include <caf/actor_system.hpp>

#include "actors/api/policy_actor.hpp"
#include "actors/api/refit_coordinator_actor.hpp"
#include "actors/api/rollout_actor.hpp"

namespace tandem {

struct refit_coordinator_config {
  refit_mode mode = refit_mode::dedicated;
  policy_actor policy;                          ///< policy rank 0: the manifest, and the root of every stream
  std::vector<rollout_actor> rollout;           ///< every rollout worker, named by their handshake answers
  std::int64_t bucket_bytes = std::int64_t{64} << 20;  ///< > 0; the rollout engines must cut the same buckets
  bool checksums = false;                       ///< every bucket's checksum is compared (debug integrity)
  bool in_place = false;                        ///< dedicated: the rollout workers receive over their live weights
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};  ///< per request and per stage
};

/// Spawns a refit coordinator (an event-based actor).
refit_coordinator_actor spawn_refit_coordinator(caf::actor_system& sys, refit_coordinator_config config);

}  // namespace tandem
