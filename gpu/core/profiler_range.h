// The CUDA profiler's collection range: a benchmark brackets the work it wants profiled, so that
// `ncu --profile-from-start off` (or any profiler that honours cudaProfilerStart / Stop) sees that
// work alone. Outside a profiler the calls do nothing; on the CPU there is nothing to bracket.
#pragma once

#include "gpu/core/device.h"
#include "gpu/core/status.h"

namespace tandem::gpu {

/// Starts collection on dev's GPU (ok on the CPU).
status profiler_range_start(device dev);
/// Stops it (ok on the CPU).
status profiler_range_stop(device dev);

}  // namespace tandem::gpu
