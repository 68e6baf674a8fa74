// One refit streamed over the refit group (DESIGN.md section 4), the only route by which weight
// bytes reach dedicated rollout workers: the policy root broadcasts every bucket of its current
// weights to the rollout workers of the group (group rank 0 = the policy root, ranks 1..R = the
// rollout workers), so no weight byte passes the controller. A bucket is a byte range of the
// bucket plan (weight_manifest.h), which both sides cut alike from the checked manifest. Both
// loops are plain blocking functions, run on the workers' engine executors.
//
// Wire protocol of one stream: every rank takes part in every broadcast, in this order, and the
// order and sizes are fixed by the plan, never by what a broadcast carried (so a device transport
// needs no host synchronisation per bucket: the receivers read bytes on the host twice per
// stream, at the opening and at the closing):
//
//   opening:    U8 [24]  three uint64 {magic stream_magic, status: 0 = the buckets follow,
//                                      1 = the root refused the stream (nothing follows),
//                                      bucket count}
//   for each bucket i in 0..count-1:
//     payload:  U8 [bucket_size(i)]   the bucket's bytes as the root exported them (zeros once an
//                                      export failed: the schedule is not cut short)
//   closing:    U8 [16 (+ 8 * count with checksums)]  uint64 {status: 0 = every bucket exported,
//                                      1 = the export of bucket `failed` failed; failed}, then
//                                      with checksums the bucket_checksum of every bucket
//                                      (0 from the failed one on)
//
// Integers are in host byte order (every rank of a group runs the same build on one architecture).
// A receiver imports each bucket as it arrives into the update it began, taking its checksum
// first when checksums are on, and compares the checksums once, after the closing. A receiver that
// fails at bucket i (import failure) keeps taking part in every remaining broadcast, discarding
// it, so the group stays in step; its caller aborts the update either way. A transport failure
// (the communicator returned an error) ends the stream on that rank at once. The outcome, with
// the checksum results, goes to the refit coordinator on the rollout worker's ack.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "gpu/comm/communicator.h"
#include "gpu/engine/generate_engine.h"
#include "gpu/engine/train_engine.h"
#include "gpu/engine/weight_manifest.h"

namespace tandem {

/// The first word of every stream's opening ("TRFSTRM1" read as little-endian bytes).
inline constexpr std::uint64_t stream_magic = 0x314d525453465254ull;
/// Bytes of a stream's opening broadcast.
inline constexpr std::size_t stream_opening_bytes = 24;

/// How a stream ended on one rank.
enum class stream_failure : std::uint8_t {
  none,
  corrupt,    ///< receiver: a bucket's checksum did not match its bytes (changed in transit)
  engine,     ///< root: an export failed; receiver: begin or an import failed
  aborted,    ///< receiver: the root refused the stream, or its export of a bucket failed
  transport,  ///< the communicator returned an error, or the opening was no stream's; the group is out of step
};

/// The outcome of one stream on one rank.
struct stream_outcome {
  stream_failure failure = stream_failure::none;
  std::optional<std::size_t> bucket;  ///< the first bucket that failed; none for a failure at the opening or closing
  std::string reason;                 ///< "checksum mismatch (corrupted in transit)", "<status code>: <message>", ...
  std::int64_t bytes = 0;             ///< payload bytes exported and broadcast (root) or imported (receiver)
  /// Receiver with checksums: buckets whose checksum was compared and matched.
  std::size_t checksums_matched = 0;
  /// Receiver with checksums: the first bucket whose checksum did not match its bytes.
  std::optional<std::size_t> checksum_mismatch;

  bool ok() const { return failure == stream_failure::none; }
};

/// A stream's opening as it travels, decoded; nullopt when `bytes` is not one.
struct stream_opening {
  bool refused = false;
  std::size_t bucket_count = 0;
};
std::optional<stream_opening> read_stream_opening(std::span<const std::byte> bytes);

/// The root's side: exports every bucket of `plan` from `engine` and broadcasts it to the group
/// as its root (root = group.rank()).
stream_outcome send_stream(gpu::communicator& group, const gpu::train_engine& engine, const gpu::bucket_plan& plan,
                           bool checksums);

/// The root's side of a stream it refuses: the opening with status 1, so the receivers stop.
gpu::status refuse_stream(gpu::communicator& group);

/// A receiver's side: takes every bucket of `plan` from `root` and imports it into `engine`,
/// whose weight update has begun (verifying every checksum when `checksums`). With no engine
/// (nullptr) it only takes part, discarding every bucket: a receiver that refuses the stream
/// keeps the group in step this way. After a failure the engine's update is left as the failure
/// left it; the caller aborts it.
stream_outcome receive_stream(gpu::communicator& group, int root, gpu::generate_engine* engine,
                              const gpu::bucket_plan& plan, bool checksums);

}  // namespace tandem
