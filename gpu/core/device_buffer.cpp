// Device buffers: host buffers on the CPU, stream-ordered memory on CUDA.
#include "gpu/core/device_buffer.h"

#include <array>
#include <atomic>
#include <cstring>
#include <new>
#include <string>

#include "gpu/core/host_buffer.h"
#include "gpu/core/memory.h"

namespace tandem::gpu {
namespace {

// Live and peak bytes of the CUDA devices' buffers, by ordinal (the CPU's are the host buffers').
constexpr int max_devices = 64;
struct counters {
  std::atomic<std::int64_t> live{0}, peak{0};
};
std::array<counters, max_devices> cuda_counts;

counters* counts_of(const device& dev) {
  if (dev.is_cpu() || dev.index < 0 || dev.index >= max_devices) return nullptr;
  return &cuda_counts[static_cast<std::size_t>(dev.index)];
}

void count(const device& dev, std::int64_t bytes) {
  counters* c = counts_of(dev);
  if (!c) return;
  const std::int64_t now = c->live.fetch_add(bytes) + bytes;
  std::int64_t p = c->peak.load();
  while (now > p && !c->peak.compare_exchange_weak(p, now)) {
  }
}

std::int64_t bytes_of(dtype type, const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n * static_cast<std::int64_t>(size_of(type));
}

}  // namespace

result<device_buffer> device_buffer::zeros(const exec_context& ctx, dtype type, std::vector<std::int64_t> shape) {
  return allocate(ctx, type, std::move(shape), true);
}

result<device_buffer> device_buffer::unfilled(const exec_context& ctx, dtype type, std::vector<std::int64_t> shape) {
  return allocate(ctx, type, std::move(shape), false);
}

result<device_buffer> device_buffer::allocate(const exec_context& ctx, dtype type, std::vector<std::int64_t> shape, bool zero) {
  for (auto d : shape)
    if (d < 0) return status(status_code::invalid_argument, "device_buffer: a negative dimension in " + shape_string(shape));
  device_buffer b;
  b.type_ = type;
  b.device_ = ctx.dev;
  const std::int64_t bytes = bytes_of(type, shape);
  b.shape_ = std::move(shape);
  if (ctx.dev.is_cpu()) {
    try {
      b.data_ = host_buffer(type, b.shape_).storage();
      if (!zero) std::memset(b.data_.get(), 0xFF, static_cast<std::size_t>(bytes));
    } catch (const std::bad_alloc&) {
      return status(status_code::out_of_memory, "allocating " + std::to_string(bytes) + " bytes on the cpu failed");
    }
    return b;
  }
  auto p = zero ? device_allocate_ordered(ctx, bytes) : device_allocate_ordered_unfilled(ctx, bytes);
  if (!p) return p.error();
  count(ctx.dev, bytes);
  const device dev = ctx.dev;
  const stream_ref stream = ctx.stream;
  b.data_ = std::shared_ptr<void>(*p, [dev, stream, bytes](void* q) {
    device_free_ordered(dev, stream, q);
    count(dev, -bytes);
  });
  return b;
}

std::int64_t device_buffer::numel() const {
  std::int64_t n = 1;
  for (auto d : shape_) n *= d;
  return n;
}

namespace {

template <class Make>
status allocate_each(std::initializer_list<buffer_request> requests, dtype type, Make&& make) {
  for (const buffer_request& r : requests) {
    auto b = make(r.type.value_or(type), r.shape);
    if (!b) return b.error();
    *r.out = std::move(*b);
  }
  return status::ok();
}

}  // namespace

status allocate_buffers(const exec_context& ctx, dtype type, std::initializer_list<buffer_request> requests) {
  return allocate_each(requests, type, [&](dtype t, const std::vector<std::int64_t>& shape) { return device_buffer::zeros(ctx, t, shape); });
}

status allocate_unfilled_buffers(const exec_context& ctx, dtype type, std::initializer_list<buffer_request> requests) {
  return allocate_each(requests, type, [&](dtype t, const std::vector<std::int64_t>& shape) { return device_buffer::unfilled(ctx, t, shape); });
}

std::int64_t device_buffer_live_bytes(const device& dev) {
  if (dev.is_cpu()) return host_buffer_live_bytes();
  counters* c = counts_of(dev);
  return c ? c->live.load() : 0;
}

std::int64_t device_buffer_peak_bytes(const device& dev) {
  if (dev.is_cpu()) return host_buffer_peak_bytes();
  counters* c = counts_of(dev);
  return c ? c->peak.load() : 0;
}

void reset_device_buffer_peak(const device& dev) {
  if (dev.is_cpu()) return reset_host_buffer_peak();
  if (counters* c = counts_of(dev)) c->peak.store(c->live.load());
}

}  // namespace tandem::gpu
