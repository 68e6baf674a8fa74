// The process's count of host waits for a device (host_waits.h).
#include "gpu/core/host_waits.h"

#include <atomic>

namespace tandem::gpu {
namespace {

std::atomic<std::int64_t> waits{0};

}  // namespace

std::int64_t host_waits() { return waits.load(std::memory_order_relaxed); }

void count_host_wait() { waits.fetch_add(1, std::memory_order_relaxed); }

}  // namespace tandem::gpu
