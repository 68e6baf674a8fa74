// Device enumeration and a kernel self-test for builds with the CUDA backend.
#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "gpu/core/cuda/check.h"
#include "gpu/core/device_query.h"

namespace tandem::gpu {
namespace internal {
std::string cublas_version();  // library_versions.cpp (host compiler: keeps cuBLAS/NCCL headers out of nvcc)
std::string nccl_version();
}  // namespace internal

namespace {

// ---------------------------------------------------------------------------------------------
// CUDA kernels

/// x[i] = i * scale for i < n.
__global__ void fill_kernel(float* x, int n, float scale) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = static_cast<float>(i) * scale;
}

/// One block: out[0] = sum(x[0..n)) by a shared-memory tree.
__global__ void sum_kernel(const float* x, int n, float* out) {
  __shared__ float partial[256];
  float acc = 0.f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) acc += x[i];
  partial[threadIdx.x] = acc;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[0] = partial[0];
}

// ---------------------------------------------------------------------------------------------
// launchers

status run_self_test(int device, float*& x, float*& sum) {
  constexpr int n = 1000;
  TANDEM_CUDA_CHECK(cudaSetDevice(device));
  TANDEM_CUDA_CHECK(cudaMalloc(&x, n * sizeof(float)));
  TANDEM_CUDA_CHECK(cudaMalloc(&sum, sizeof(float)));
  fill_kernel<<<(n + 255) / 256, 256>>>(x, n, 0.5f);
  TANDEM_CUDA_CHECK(cudaGetLastError());
  sum_kernel<<<1, 256>>>(x, n, sum);
  TANDEM_CUDA_CHECK(cudaGetLastError());
  float host = 0.f;
  TANDEM_CUDA_CHECK(cudaMemcpy(&host, sum, sizeof(float), cudaMemcpyDeviceToHost));
  const float expected = 0.5f * (n - 1) * n / 2.0f;  // exact in float32
  if (host != expected)
    return {status_code::device_error, "device_self_test: sum kernel gave " + std::to_string(host) + ", expected " +
                                           std::to_string(expected)};
  return status::ok();
}

}  // namespace

backend_info query_backend() {
  backend_info info;
  info.cuda_built = true;
  info.cuda_runtime = std::to_string(CUDART_VERSION / 1000) + "." + std::to_string((CUDART_VERSION % 1000) / 10);
  info.cublas = internal::cublas_version();
  info.nccl = internal::nccl_version();
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    info.device_problem = std::string("no CUDA device: ") + cudaGetErrorString(e);
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return info;
  }
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, d) != cudaSuccess) continue;
    device_info di;
    di.index = d;
    di.name = prop.name;
    di.total_bytes = static_cast<std::int64_t>(prop.totalGlobalMem);
    di.compute_major = prop.major;
    di.compute_minor = prop.minor;
    size_t free_b = 0, total_b = 0;
    if (cudaSetDevice(d) == cudaSuccess && cudaMemGetInfo(&free_b, &total_b) == cudaSuccess)
      di.free_bytes = static_cast<std::int64_t>(free_b);
    info.devices.push_back(di);
  }
  if (info.devices.empty()) info.device_problem = "the CUDA driver reports no device";
  return info;
}

status device_self_test(int device) {
  float* x = nullptr;
  float* sum = nullptr;
  status s = run_self_test(device, x, sum);
  cudaFree(x);
  cudaFree(sum);
  return s;
}

}  // namespace tandem::gpu
