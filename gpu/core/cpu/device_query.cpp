// Backend query of a build without the CUDA backend.
#include "gpu/core/device_query.h"

namespace tandem::gpu {

backend_info query_backend() {
  backend_info info;
  info.device_problem = "this build has no CUDA backend (configured with TANDEM_CUDA=OFF or without nvcc)";
  return info;
}

status device_self_test(int) {
  return {status_code::unsupported, "device_self_test: this build has no CUDA backend"};
}

}  // namespace tandem::gpu
