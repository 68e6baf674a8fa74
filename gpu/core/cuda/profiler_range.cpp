// cudaProfilerStart / Stop for the profiler's collection range (gpu/core/profiler_range.h).
#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>

#include "gpu/core/cuda/check.h"
#include "gpu/core/status.h"

namespace tandem::gpu::internal {

status cuda_profiler_range(int index, bool start) {
  TANDEM_CUDA_CHECK(cudaSetDevice(index));
  TANDEM_CUDA_CHECK(start ? cudaProfilerStart() : cudaProfilerStop());
  return status::ok();
}

}  // namespace tandem::gpu::internal
