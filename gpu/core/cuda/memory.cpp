// CUDA device and pinned host memory (host compiler; the runtime API needs no nvcc).
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>

#include "gpu/core/cuda/check.h"
#include "gpu/core/host_waits.h"
#include "gpu/core/status.h"

#define TANDEM_RETURN_IF_CUDA_STATUS(expr)  \
  do {                                      \
    ::tandem::gpu::status tandem_s_ = (expr); \
    if (!tandem_s_) return tandem_s_;       \
  } while (0)

namespace tandem::gpu::internal {
namespace {

// The stream-ordered allocator's pool of a device keeps the memory freed into it (release
// threshold: everything) instead of returning it to the driver at every synchronisation, so each
// step's activations are reused, not mapped again. Set once per device, on its first use.
status keep_pool_memory(int index) {
  static std::atomic<std::uint64_t> done{0};  // a bit per device
  const std::uint64_t bit = index >= 0 && index < 64 ? std::uint64_t{1} << index : 0;
  if (bit != 0 && (done.load(std::memory_order_acquire) & bit) != 0) return status::ok();
  cudaMemPool_t pool = nullptr;
  TANDEM_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, index));
  std::uint64_t keep_all = ~std::uint64_t{0};
  TANDEM_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all));
  done.fetch_or(bit, std::memory_order_acq_rel);
  return status::ok();
}

// Returns what the pool keeps to the driver, once all work is done (freed blocks are reusable
// only after the frees' streams reached them), and what the graphs' pool keeps.
status trim_pool(int index) {
  TANDEM_CUDA_CHECK(cudaSetDevice(index));
  {
    const host_wait waiting;
    TANDEM_CUDA_CHECK(cudaDeviceSynchronize());
  }
  cudaMemPool_t pool = nullptr;
  TANDEM_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, index));
  TANDEM_CUDA_CHECK(cudaMemPoolTrimTo(pool, 0));
  // And what captured graphs' allocations keep once their graphs are gone.
  TANDEM_CUDA_CHECK(cudaDeviceGraphMemTrim(index));
  return status::ok();
}

}  // namespace

result<void*> cuda_allocate(int index, std::int64_t bytes) {
  void* p = nullptr;
  auto run = [&]() -> status {
    TANDEM_CUDA_CHECK(cudaSetDevice(index));
    if (cudaMalloc(&p, static_cast<size_t>(bytes)) == cudaErrorMemoryAllocation) {
      // The stream-ordered pool may hold what this needs: hand it back and try once more.
      (void)cudaGetLastError();
      p = nullptr;
      TANDEM_RETURN_IF_CUDA_STATUS(trim_pool(index));
      TANDEM_CUDA_CHECK(cudaMalloc(&p, static_cast<size_t>(bytes)));
    }
    TANDEM_CUDA_CHECK(cudaMemset(p, 0, static_cast<size_t>(bytes)));
    return status::ok();
  };
  if (status s = run(); !s) {
    if (p) cudaFree(p);
    return s;
  }
  return p;
}

void cuda_free(int index, void* p) {
  cudaSetDevice(index);
  cudaFree(p);
}

result<void*> cuda_host_allocate(std::int64_t bytes) {
  void* p = nullptr;
  auto run = [&]() -> status {
    TANDEM_CUDA_CHECK(cudaMallocHost(&p, static_cast<size_t>(bytes)));
    return status::ok();
  };
  if (status s = run(); !s) return s;
  return p;
}

void cuda_host_free(void* p) { cudaFreeHost(p); }

status cuda_copy(int index, void* dst, const void* src, std::int64_t bytes, bool to_device) {
  TANDEM_CUDA_CHECK(cudaSetDevice(index));
  const host_wait waiting;
  TANDEM_CUDA_CHECK(cudaMemcpy(dst, src, static_cast<size_t>(bytes),
                               to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost));
  return status::ok();
}

enum class copy_kind { device_to_device, device_to_host, host_to_device, staged_to_device, device_to_staged };

result<void*> cuda_allocate_ordered(int index, void* stream, std::int64_t bytes, bool zero) {
  void* p = nullptr;
  const auto s = static_cast<cudaStream_t>(stream);
  auto run = [&]() -> status {
    TANDEM_CUDA_CHECK(cudaSetDevice(index));
    TANDEM_RETURN_IF_CUDA_STATUS(keep_pool_memory(index));
    TANDEM_CUDA_CHECK(cudaMallocAsync(&p, static_cast<size_t>(bytes == 0 ? 256 : bytes), s));
    if (zero) TANDEM_CUDA_CHECK(cudaMemsetAsync(p, 0, static_cast<size_t>(bytes), s));
    return status::ok();
  };
  if (status r = run(); !r) {
    if (p) cudaFreeAsync(p, s);
    return status(r.code(), "allocating " + std::to_string(bytes) + " bytes on cuda:" + std::to_string(index) + ": " + r.message());
  }
  return p;
}

void cuda_free_ordered(int index, void* stream, void* p) {
  cudaSetDevice(index);
  cudaFreeAsync(p, static_cast<cudaStream_t>(stream));
}

status cuda_copy_ordered(int index, void* stream, void* dst, const void* src, std::int64_t bytes, copy_kind kind) {
  const auto s = static_cast<cudaStream_t>(stream);
  const cudaMemcpyKind how = kind == copy_kind::device_to_device                                     ? cudaMemcpyDeviceToDevice
                             : kind == copy_kind::device_to_host || kind == copy_kind::device_to_staged ? cudaMemcpyDeviceToHost
                                                                                                        : cudaMemcpyHostToDevice;
  TANDEM_CUDA_CHECK(cudaSetDevice(index));
  if (kind == copy_kind::device_to_device || kind == copy_kind::staged_to_device || kind == copy_kind::device_to_staged) {
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), how, s));
    return status::ok();
  }
  // A host side is complete when the call returns: the caller may read it or reuse it at once
  // (host staging memory, above, is kept by its caller until the stream has passed the copy).
  // The wait covers the copy call too: with pageable host memory cudaMemcpyAsync itself returns
  // only once the stream has reached and finished the copy.
  const host_wait waiting;
  TANDEM_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), how, s));
  TANDEM_CUDA_CHECK(cudaStreamSynchronize(s));
  return status::ok();
}

status cuda_fill_zero(int index, void* stream, void* p, std::int64_t bytes) {
  TANDEM_CUDA_CHECK(cudaSetDevice(index));
  TANDEM_CUDA_CHECK(cudaMemsetAsync(p, 0, static_cast<size_t>(bytes), static_cast<cudaStream_t>(stream)));
  return status::ok();
}

status cuda_wait_for_device(int index) {
  TANDEM_CUDA_CHECK(cudaSetDevice(index));
  {
    const host_wait waiting;
    TANDEM_CUDA_CHECK(cudaDeviceSynchronize());
  }
  return status::ok();
}

status cuda_release_cached(int index) { return trim_pool(index); }

result<std::int64_t> cuda_memory_in_use(int index) {
  TANDEM_CUDA_CHECK(cudaSetDevice(index));
  size_t free_b = 0, total_b = 0;
  TANDEM_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  return static_cast<std::int64_t>(total_b - free_b);
}

}  // namespace tandem::gpu::internal
