// Device memory: the CPU backend here, CUDA devices forwarded to cuda/memory.cpp when built.
#include "gpu/core/memory.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "gpu/core/op_profile.h"

namespace tandem::gpu {
namespace internal {
// as cuda/memory.cpp has it; staged_to_device / device_to_staged: from / into host staging
// memory, enqueued without waiting
enum class copy_kind { device_to_device, device_to_host, host_to_device, staged_to_device, device_to_staged };
#if TANDEM_HAVE_CUDA
result<void*> cuda_allocate(int index, std::int64_t bytes);
void cuda_free(int index, void* p);
result<void*> cuda_host_allocate(std::int64_t bytes);
void cuda_host_free(void* p);
status cuda_copy(int index, void* dst, const void* src, std::int64_t bytes, bool to_device);
result<void*> cuda_allocate_ordered(int index, void* stream, std::int64_t bytes, bool zero);
void cuda_free_ordered(int index, void* stream, void* p);
status cuda_copy_ordered(int index, void* stream, void* dst, const void* src, std::int64_t bytes, copy_kind kind);
status cuda_fill_zero(int index, void* stream, void* p, std::int64_t bytes);
status cuda_wait_for_device(int index);
status cuda_release_cached(int index);
result<std::int64_t> cuda_memory_in_use(int index);
#endif
}  // namespace internal

namespace {

result<void*> host_allocate(std::int64_t bytes) {
  const auto rounded = static_cast<std::size_t>((bytes + 63) / 64 * 64);
  void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  if (!p) return status{status_code::out_of_memory, "host allocation of " + std::to_string(bytes) + " bytes failed"};
  std::memset(p, 0, rounded == 0 ? 64 : rounded);
  return p;
}

#if !TANDEM_HAVE_CUDA
status no_cuda() { return {status_code::unsupported, "this build has no CUDA backend"}; }
#endif

}  // namespace

result<void*> device_allocate(device dev, std::int64_t bytes) {
  if (dev.is_cpu()) return host_allocate(bytes);
#if TANDEM_HAVE_CUDA
  return internal::cuda_allocate(dev.index, bytes);
#else
  return no_cuda();
#endif
}

void device_free(device dev, void* p) {
  if (!p) return;
  if (dev.is_cpu()) return std::free(p);
#if TANDEM_HAVE_CUDA
  internal::cuda_free(dev.index, p);
#endif
}

result<void*> host_staging_allocate(device dev, std::int64_t bytes) {
  if (dev.is_cpu()) return host_allocate(bytes);
#if TANDEM_HAVE_CUDA
  return internal::cuda_host_allocate(bytes);
#else
  return no_cuda();
#endif
}

void host_staging_free(device dev, void* p) {
  if (!p) return;
  if (dev.is_cpu()) return std::free(p);
#if TANDEM_HAVE_CUDA
  internal::cuda_host_free(p);
#endif
}

status copy_to_host(device dev, void* host, const void* device_src, std::int64_t bytes) {
  if (dev.is_cpu()) {
    std::memcpy(host, device_src, static_cast<std::size_t>(bytes));
    return status::ok();
  }
#if TANDEM_HAVE_CUDA
  return internal::cuda_copy(dev.index, host, device_src, bytes, false);
#else
  return no_cuda();
#endif
}

status copy_to_device(device dev, void* device_dst, const void* host, std::int64_t bytes) {
  if (dev.is_cpu()) {
    std::memcpy(device_dst, host, static_cast<std::size_t>(bytes));
    return status::ok();
  }
#if TANDEM_HAVE_CUDA
  return internal::cuda_copy(dev.index, device_dst, host, bytes, true);
#else
  return no_cuda();
#endif
}

result<void*> device_allocate_ordered(const exec_context& ctx, std::int64_t bytes) {
  op_profile_mark(ctx, "(zero-filled allocation)");
  if (ctx.dev.is_cpu()) return host_allocate(bytes);
#if TANDEM_HAVE_CUDA
  return internal::cuda_allocate_ordered(ctx.dev.index, ctx.stream.native, bytes, true);
#else
  return no_cuda();
#endif
}

result<void*> device_allocate_ordered_unfilled(const exec_context& ctx, std::int64_t bytes) {
  op_profile_mark(ctx, "(allocation)");
  if (ctx.dev.is_cpu()) return host_allocate(bytes);
#if TANDEM_HAVE_CUDA
  return internal::cuda_allocate_ordered(ctx.dev.index, ctx.stream.native, bytes, false);
#else
  return no_cuda();
#endif
}

void device_free_ordered(const device& dev, stream_ref stream, void* p) {
  if (!p) return;
  if (dev.is_cpu()) return std::free(p);
#if TANDEM_HAVE_CUDA
  internal::cuda_free_ordered(dev.index, stream.native, p);
#else
  (void)stream;
#endif
}

namespace {

status ordered_copy(const exec_context& ctx, void* dst, const void* src, std::int64_t bytes, internal::copy_kind kind) {
  if (bytes == 0) return status::ok();
  if (ctx.dev.is_cpu()) {
    std::memcpy(dst, src, static_cast<std::size_t>(bytes));
    return status::ok();
  }
#if TANDEM_HAVE_CUDA
  return internal::cuda_copy_ordered(ctx.dev.index, ctx.stream.native, dst, src, bytes, kind);
#else
  (void)kind;
  return no_cuda();
#endif
}

}  // namespace

status copy_on_device(const exec_context& ctx, void* dst, const void* src, std::int64_t bytes) {
  op_profile_mark(ctx, "(copy within the device)");
  return ordered_copy(ctx, dst, src, bytes, internal::copy_kind::device_to_device);
}

// A copy across the host boundary returns once complete: its mark is charged with the copy, and
// the mark after it with whatever the host does before it enqueues the next work (the device
// waits meanwhile).
status copy_to_host(const exec_context& ctx, void* host, const void* device_src, std::int64_t bytes) {
  op_profile_mark(ctx, "(copy to the host)");
  const status s = ordered_copy(ctx, host, device_src, bytes, internal::copy_kind::device_to_host);
  op_profile_mark(ctx, "(host work after a copy to the host)");
  return s;
}

status copy_to_device(const exec_context& ctx, void* device_dst, const void* host, std::int64_t bytes) {
  op_profile_mark(ctx, "(copy from the host)");
  const status s = ordered_copy(ctx, device_dst, host, bytes, internal::copy_kind::host_to_device);
  op_profile_mark(ctx, "(host work after a copy from the host)");
  return s;
}

status enqueue_copy_to_device(const exec_context& ctx, void* device_dst, const void* staging_src, std::int64_t bytes) {
  op_profile_mark(ctx, "(copy from host staging, enqueued)");
  return ordered_copy(ctx, device_dst, staging_src, bytes, internal::copy_kind::staged_to_device);
}

status enqueue_copy_to_host(const exec_context& ctx, void* staging_dst, const void* device_src, std::int64_t bytes) {
  op_profile_mark(ctx, "(copy to host staging, enqueued)");
  return ordered_copy(ctx, staging_dst, device_src, bytes, internal::copy_kind::device_to_staged);
}

status fill_zero(const exec_context& ctx, void* p, std::int64_t bytes) {
  if (bytes == 0) return status::ok();
  op_profile_mark(ctx, "(zero fill)");
  if (ctx.dev.is_cpu()) {
    std::memset(p, 0, static_cast<std::size_t>(bytes));
    return status::ok();
  }
#if TANDEM_HAVE_CUDA
  return internal::cuda_fill_zero(ctx.dev.index, ctx.stream.native, p, bytes);
#else
  return no_cuda();
#endif
}

status wait_for_device(const exec_context& ctx) {
  if (ctx.dev.is_cpu()) return status::ok();
#if TANDEM_HAVE_CUDA
  return internal::cuda_wait_for_device(ctx.dev.index);
#else
  return no_cuda();
#endif
}

status release_cached_memory(const exec_context& ctx) {
  if (ctx.dev.is_cpu()) return status::ok();
#if TANDEM_HAVE_CUDA
  return internal::cuda_release_cached(ctx.dev.index);
#else
  return no_cuda();
#endif
}

result<std::int64_t> device_memory_in_use(const device& dev) {
  if (dev.is_cpu()) return status{status_code::unsupported, "the CPU has no device memory apart from the host's"};
#if TANDEM_HAVE_CUDA
  return internal::cuda_memory_in_use(dev.index);
#else
  return no_cuda();
#endif
}

}  // namespace tandem::gpu
