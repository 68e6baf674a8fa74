// How often this process's host has waited for a device: every explicit synchronisation (a
// stream, an event, the whole device) and every copy that returns only once complete. A figure
// for tests and benchmarks (a decode step of the generate engine should wait once, for its
// tokens); the CPU backend never waits. Copies from pageable host memory that the driver may
// serialise on its own are not counted.
#pragma once

#include <cstdint>

namespace tandem::gpu {

/// Waits counted since the process started.
std::int64_t host_waits();
/// Called by the CUDA code at each wait.
void count_host_wait();

}  // namespace tandem::gpu
