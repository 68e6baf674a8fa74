// Check macros for CUDA runtime calls: a failure becomes a status naming the statement, the
// error and file:line, returned from the enclosing function. Never exits.
#pragma once

#include <string>

#include <cuda_runtime_api.h>

#include "gpu/core/status.h"

namespace tandem::gpu::internal {

/// The status of a failed CUDA call. The runtime also keeps a failure as its "last error", which
/// the next launch's check would then report under the next op's name: a failure that is not
/// sticky (an invalid argument, say) is taken off here, so it is reported once, as this call's.
inline status cuda_status(cudaError_t e, const char* statement, const char* file, int line) {
  (void)cudaGetLastError();
  const status_code code = e == cudaErrorMemoryAllocation ? status_code::out_of_memory : status_code::device_error;
  return {code, std::string(statement) + " failed: " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ") at " +
                    file + ":" + std::to_string(line)};
}

}  // namespace tandem::gpu::internal

/// Evaluates a cudaError_t expression; on failure returns a status from the enclosing function.
#define TANDEM_CUDA_CHECK(statement)                                                          \
  do {                                                                                        \
    const cudaError_t tandem_cuda_error_ = (statement);                                       \
    if (tandem_cuda_error_ != cudaSuccess)                                                    \
      return ::tandem::gpu::internal::cuda_status(tandem_cuda_error_, #statement, __FILE__, __LINE__); \
  } while (0)
