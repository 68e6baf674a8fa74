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

}  // namespace tandem::gpu::internal
