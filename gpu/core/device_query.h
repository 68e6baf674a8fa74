// What compute backends this build has and which devices this machine shows it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gpu/core/status.h"

namespace tandem::gpu {

struct device_info {
  int index = 0;
  std::string name;              ///< "NVIDIA H200"
  std::int64_t total_bytes = 0;  ///< device memory
  std::int64_t free_bytes = 0;   ///< free when queried
  int compute_major = 0, compute_minor = 0;
};

struct backend_info {
  bool cuda_built = false;        ///< this binary contains the CUDA backend
  std::string cuda_runtime;       ///< e.g. "13.0" (statically linked runtime)
  std::string cublas;             ///< e.g. "13.1.0" (dynamically loaded; queried without a GPU)
  std::string nccl;               ///< e.g. "2.28.9"
  std::vector<device_info> devices;  ///< empty without a GPU or driver
  std::string device_problem;     ///< why no device is visible ("" when devices exist)
};

/// Never fails: problems end up in device_problem.
backend_info query_backend();

/// Runs a small kernel on `device` (fill, reduce, copy back) and checks the result: proves the
/// driver, the runtime and this binary's device code work together. unsupported without CUDA.
status device_self_test(int device);

}  // namespace tandem::gpu
