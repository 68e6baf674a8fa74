// One refit streamed over the data plane (bucket_route::data_plane): the policy root broadcasts
// every bucket of its current weights to the rollout workers of the refit group (group rank 0 =
// the policy root, ranks 1..R = the rollout workers), so no weight byte passes the controller.
// Both loops are plain blocking functions, run on the workers' engine executors.
//
// Wire protocol of one stream (every rank takes part in every broadcast, in this order):
//
//   for each bucket i in 0..count-1:
//     header broadcast:  I32 [4] = two uint64 {status: 0 = bucket i follows,
//                                                       1 = stream aborted by the root;
//                                               checksum: bucket_checksum of bucket i, 0 when off}
//     if status == 0:    payload broadcast: I32 [ceil(bucket_size(i) / 4)] = the bucket's bytes,
//                        zero-padded to whole words (receivers use the first bucket_size(i) bytes)
//
// The communicator moves typed elements only (communicator.h), so the opaque header and payload
// travel as int32 words; nothing reads them as numbers.
//
// The root exports bucket i, computes its checksum (when on), broadcasts header then payload. If
// an export fails it broadcasts a header with status 1 and stops; the receivers stop too. A
// receiver that finds bucket i bad (checksum, import failure) keeps taking part in every remaining
// broadcast, discarding it, so the group stays in step. A transport failure (the communicator
// returns an error) ends the stream on that rank at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "gpu/comm/communicator.h"
#include "gpu/engine/generate_engine.h"
#include "gpu/engine/train_engine.h"
#include "gpu/engine/weight_manifest.h"

namespace tandem {

/// How a stream ended on one rank.
enum class stream_failure : std::uint8_t {
  none,
  corrupt,    ///< receiver: a bucket's checksum did not match its bytes (changed in transit)
  engine,     ///< root: an export failed (the stream was aborted); receiver: an import failed
  aborted,    ///< receiver: the root aborted the stream
  transport,  ///< the communicator returned an error; the group is out of step
};

/// The outcome of one stream on one rank.
struct stream_outcome {
  stream_failure failure = stream_failure::none;
  std::size_t bucket = 0;  ///< the first bucket that failed (when failure != none)
  std::string reason;      ///< "checksum mismatch (corrupted in transit)", "<status code>: <message>", ...
  std::int64_t bytes = 0;  ///< payload bytes broadcast (root) or imported (receiver)

  bool ok() const { return failure == stream_failure::none; }
};

/// The root's side: exports every bucket of `plan` from `engine` and broadcasts it to the group
/// as its root (root = group.rank()).
stream_outcome send_stream(gpu::communicator& group, const gpu::train_engine& engine, const gpu::bucket_plan& plan,
                           bool checksums);

/// The root's side of a stream it refuses: one header with status 1, so the receivers stop.
gpu::status abort_stream(gpu::communicator& group);

/// A receiver's side: takes every bucket of `plan` from `root` and imports it into `engine`,
/// whose weight update has begun (verifying each checksum when `checksums`). With no engine
/// (nullptr) it only takes part, discarding every bucket: a receiver that refuses the stream
/// keeps the group in step this way. After a failure the engine's update is left as the failure
/// left it; the caller aborts it.
stream_outcome receive_stream(gpu::communicator& group, int root, gpu::generate_engine* engine,
                              const gpu::bucket_plan& plan, bool checksums);

}  // namespace tandem
