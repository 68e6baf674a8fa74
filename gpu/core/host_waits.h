// How often and how long this process's host has waited for a device: every explicit
// synchronisation (a stream, an event, the whole device) and every copy that returns only once
// complete. A figure
// for tests and benchmarks (a decode step of the generate engine should wait once, for its
// tokens); the CPU backend never waits. Copies from pageable host memory that the driver may
// serialise on its own are not counted.
#pragma once

#include <chrono>
#include <cstdint>

namespace tandem::gpu {

/// Waits counted since the process started.
std::int64_t host_waits();
/// Seconds the host has spent in them: what is left of a step's time once this is taken out is
/// the host's own work (enqueueing, scheduling), the part a faster device cannot shorten.
double host_wait_seconds();

/// One wait of the host for a device, made by the CUDA code around each synchronising call:
/// counted when made, timed until it goes out of scope (a block holding the call alone).
class host_wait {
 public:
  host_wait();
  ~host_wait();
  host_wait(const host_wait&) = delete;
  host_wait& operator=(const host_wait&) = delete;

 private:
  std::chrono::steady_clock::time_point start_;
};

}  // namespace tandem::gpu
