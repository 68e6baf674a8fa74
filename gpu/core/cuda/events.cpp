// CUDA events for the op profile's timing and for stream markers (host compiler; the runtime API
// needs no nvcc).
#include <cuda_runtime_api.h>

#include "gpu/core/cuda/check.h"
#include "gpu/core/host_waits.h"
#include "gpu/core/status.h"

namespace tandem::gpu::internal {

result<void*> cuda_record_event(int index, void* stream) {
  TANDEM_CUDA_CHECK(cudaSetDevice(index));
  cudaEvent_t e = nullptr;
  TANDEM_CUDA_CHECK(cudaEventCreate(&e));
  if (const cudaError_t r = cudaEventRecord(e, static_cast<cudaStream_t>(stream)); r != cudaSuccess) {
    cudaEventDestroy(e);
    return cuda_status(r, "cudaEventRecord", __FILE__, __LINE__);
  }
  return static_cast<void*>(e);
}

result<double> cuda_event_ms(void* from, void* to) {
  {
    const host_wait waiting;
    TANDEM_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(to)));
  }
  float ms = 0;
  TANDEM_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(from), static_cast<cudaEvent_t>(to)));
  return static_cast<double>(ms);
}

status cuda_wait_event(void* event) {
  const host_wait waiting;
  TANDEM_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event)));
  return status::ok();
}

void cuda_destroy_event(void* event) { cudaEventDestroy(static_cast<cudaEvent_t>(event)); }

}  // namespace tandem::gpu::internal
