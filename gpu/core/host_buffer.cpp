// Aligned host allocations.
#include "gpu/core/host_buffer.h"

#include <cstring>
#include <new>

namespace tandem::gpu {

host_buffer::host_buffer(dtype type, std::vector<std::int64_t> shape) : type_(type), shape_(std::move(shape)) {
  const std::size_t bytes = static_cast<std::size_t>(numel()) * size_of(type);
  const std::size_t rounded = (bytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, rounded == 0 ? 64 : rounded);
  data_ = std::shared_ptr<void>(p, aligned_free{});
}

std::int64_t host_buffer::numel() const {
  std::int64_t n = 1;
  for (auto d : shape_) n *= d;
  return n;
}

}  // namespace tandem::gpu
