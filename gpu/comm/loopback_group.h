// The ranks of one zmq_group (zmq_group.h) in this process, over tcp://127.0.0.1: each rank bound,
// then all joined at once, one thread a rank, as member processes join. For the benchmarks that
// time the CPU data plane (tools/bench/curve_bench, `tandem bench refit`).
#pragma once

#include <memory>
#include <vector>

#include "gpu/comm/zmq_group.h"

namespace tandem::gpu {

/// `n` (>= 1) ranks in rank order, with `options` (its curve ignored: `secure` gives every rank
/// fresh CurveZMQ keys, each accepting the others'). An error names the rank that could not bind
/// or join.
result<std::vector<std::unique_ptr<zmq_group>>> join_loopback_group(int n, bool secure, zmq_group_options options = {});

}  // namespace tandem::gpu
