// `tandem bench refit`: the refit of a model's bytes from a policy root to rollout workers over
// the run's own transport and stream protocol (actors/api/refit_stream.hpp), beside a plain
// broadcast of the same buckets over the same group, measured in the same run.
//
// The weights are the fake engines' (gpu/engine/fake/): a refit moves bytes, whatever they mean,
// and the fake trainer exports and the fake generator imports them with a memory copy, so the
// figure is the transport's and the protocol's. The group is the CPU data plane
// (gpu/comm/zmq_group.h): one rank per thread of this process over tcp://127.0.0.1, with CurveZMQ
// as a run's members use it unless `insecure`.
//
//   each round:  broadcast  rank 0 broadcasts every bucket's bytes; timed until every rank has them
//                refit      rank 0 send_stream; every receiver begin_weight_update, receive_stream,
//                           commit_weight_update; timed until every receiver committed
//   after all:   every receiver's weights hash as the trainer's (the refit delivered the bits)
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "gpu/core/status.h"
#include "gpu/engine/generate_engine.h"

namespace tandem::cli {

struct refit_bench_settings {
  std::optional<std::filesystem::path> model;  ///< a config dir: its parameters' bytes in `bytes_per_parameter`
  std::int64_t bytes = 0;                      ///< without a model: the bytes refit (a multiple of 4)
  int bytes_per_parameter = 2;                 ///< bfloat16, as a GPU refit moves them
  std::int64_t bucket_bytes = std::int64_t{512} << 20;  ///< policy.refit.bucket_mb's default
  int receivers = 1;                           ///< rollout workers (ranks 1..receivers)
  int rounds = 3;                              ///< each timed; the fastest kept
  bool checksums = false;                      ///< policy.refit.checksums
  gpu::refit_receive receive = gpu::refit_receive::staging;
  bool insecure = false;                       ///< CurveZMQ off
};

struct refit_bench_figures {
  std::int64_t bytes = 0;
  std::int64_t buckets = 0;
  double broadcast_seconds = 0;  ///< the fastest round
  double refit_seconds = 0;      ///< the fastest round
  bool bits_delivered = false;   ///< every receiver's weights hash as the trainer's
};

/// Runs the rounds. An error names what failed (the model, the group, a stream and its rank).
gpu::result<refit_bench_figures> run_refit_bench(const refit_bench_settings& s);

}  // namespace tandem::cli
