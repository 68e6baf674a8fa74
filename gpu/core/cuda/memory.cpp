// CUDA device and pinned host memory (host compiler; the runtime API needs no nvcc).
#include <cuda_runtime_api.h>

#include "gpu/core/cuda/check.h"
#include "gpu/core/status.h"

namespace tandem::gpu::internal {

result<void*> cuda_allocate(int index, std::int64_t bytes) {
  void* p = nullptr;
  auto run = [&]() -> status {
    TANDEM_CUDA_CHECK(cudaSetDevice(index));
    TANDEM_CUDA_CHECK(cudaMalloc(&p, static_cast<size_t>(bytes)));
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
  TANDEM_CUDA_CHECK(cudaMemcpy(dst, src, static_cast<size_t>(bytes),
                               to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost));
  return status::ok();
}

enum class copy_kind { device_to_device, device_to_host, host_to_device };

result<void*> cuda_allocate_ordered(int index, void* stream, std::int64_t bytes) {
  void* p = nullptr;
  const auto s = static_cast<cudaStream_t>(stream);
  auto run = [&]() -> status {
    TANDEM_CUDA_CHECK(cudaSetDevice(index));
    TANDEM_CUDA_CHECK(cudaMallocAsync(&p, static_cast<size_t>(bytes == 0 ? 256 : bytes), s));
    TANDEM_CUDA_CHECK(cudaMemsetAsync(p, 0, static_cast<size_t>(bytes), s));
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
  const cudaMemcpyKind how = kind == copy_kind::device_to_device ? cudaMemcpyDeviceToDevice
                             : kind == copy_kind::device_to_host ? cudaMemcpyDeviceToHost
                                                                 : cudaMemcpyHostToDevice;
  TANDEM_CUDA_CHECK(cudaSetDevice(index));
  TANDEM_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), how, s));
  // A host side is complete when the call returns: the caller may read it or reuse it at once.
  if (kind != copy_kind::device_to_device) TANDEM_CUDA_CHECK(cudaStreamSynchronize(s));
  return status::ok();
}

status cuda_fill_zero(int index, void* stream, void* p, std::int64_t bytes) {
  TANDEM_CUDA_CHECK(cudaSetDevice(index));
  TANDEM_CUDA_CHECK(cudaMemsetAsync(p, 0, static_cast<size_t>(bytes), static_cast<cudaStream_t>(stream)));
  return status::ok();
}

status cuda_wait_for_device(int index) {
  TANDEM_CUDA_CHECK(cudaSetDevice(index));
  TANDEM_CUDA_CHECK(cudaDeviceSynchronize());
  return status::ok();
}

}  // namespace tandem::gpu::internal
