// Versions of the dynamically loaded CUDA libraries; these calls work without a GPU or driver.
#include <cublasLt.h>
#include <nccl.h>

#include <string>

namespace tandem::gpu::internal {

std::string cublas_version() {
  const size_t v = cublasLtGetVersion();  // e.g. 130100
  return std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." + std::to_string(v % 100);
}

std::string nccl_version() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "unknown";
  return std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." + std::to_string(v % 100);
}

}  // namespace tandem::gpu::internal
