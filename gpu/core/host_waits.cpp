// The process's count of host waits for a device (host_waits.h).
#include "gpu/core/host_waits.h"

#include <atomic>

namespace tandem::gpu {
namespace {

std::atomic<std::int64_t> waits{0};
std::atomic<std::int64_t> waited_ns{0};

}  // namespace

std::int64_t host_waits() { return waits.load(std::memory_order_relaxed); }

double host_wait_seconds() { return static_cast<double>(waited_ns.load(std::memory_order_relaxed)) * 1e-9; }

host_wait::host_wait() : start_(std::chrono::steady_clock::now()) { waits.fetch_add(1, std::memory_order_relaxed); }

host_wait::~host_wait() {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_).count();
  waited_ns.fetch_add(ns, std::memory_order_relaxed);
}

}  // namespace tandem::gpu
