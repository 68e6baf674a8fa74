// Device memory: the CPU backend here, CUDA devices forwarded to cuda/memory.cpp when built.
#include "gpu/core/memory.h"

#include <cstdlib>
#include <cstring>
#include <string>

namespace tandem::gpu {
namespace internal {
#if TANDEM_HAVE_CUDA
result<void*> cuda_allocate(int index, std::int64_t bytes);
void cuda_free(int index, void* p);
result<void*> cuda_host_allocate(std::int64_t bytes);
void cuda_host_free(void* p);
status cuda_copy(int index, void* dst, const void* src, std::int64_t bytes, bool to_device);
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

}  // namespace tandem::gpu
