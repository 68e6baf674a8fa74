// Aligned host allocations.
#include "gpu/core/host_buffer.h"

#include <atomic>
#include <cstring>
#include <new>

namespace tandem::gpu {
namespace {

std::atomic<std::int64_t> live{0}, peak{0};

void count(std::int64_t bytes) {
  const std::int64_t now = live.fetch_add(bytes) + bytes;
  std::int64_t p = peak.load();
  while (now > p && !peak.compare_exchange_weak(p, now)) {
  }
}

}  // namespace

std::int64_t host_buffer_live_bytes() { return live.load(); }
std::int64_t host_buffer_peak_bytes() { return peak.load(); }
void reset_host_buffer_peak() { peak.store(live.load()); }

void host_buffer::aligned_free::operator()(void* p) const {
  std::free(p);
  live.fetch_sub(bytes);
}

host_buffer::host_buffer(dtype type, std::vector<std::int64_t> shape) : type_(type), shape_(std::move(shape)) {
  const std::size_t bytes = static_cast<std::size_t>(numel()) * size_of(type);
  const std::size_t rounded = (bytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, rounded == 0 ? 64 : rounded);
  const auto held = static_cast<std::int64_t>(rounded == 0 ? 64 : rounded);
  count(held);
  data_ = std::shared_ptr<void>(p, aligned_free{held});
}

std::int64_t host_buffer::numel() const {
  std::int64_t n = 1;
  for (auto d : shape_) n *= d;
  return n;
}

}  // namespace tandem::gpu
