// What every CUDA op launcher needs (nvcc only): the context's stream, making its device current,
// launch shapes for 64-bit element counts, and a launch's error turned into a status naming the op
// and the kernel. Nothing here synchronises: an op returns once its work is enqueued.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "gpu/core/cuda/check.h"
#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"

namespace tandem::gpu::ops::cuda {

inline cudaStream_t stream_of(const exec_context& ctx) { return static_cast<cudaStream_t>(ctx.stream.native); }

/// Makes the context's device current for this thread (a no-op when it already is).
inline status use_device(const exec_context& ctx) {
  int current = -1;
  TANDEM_CUDA_CHECK(cudaGetDevice(&current));
  if (current != ctx.dev.index) TANDEM_CUDA_CHECK(cudaSetDevice(ctx.dev.index));
  return status::ok();
}

/// The error of the last launch (or an earlier asynchronous fault) as device_error
/// "<op>: <kernel>: <error name> (<text>)"; ok when there is none.
inline status launch_status(std::string_view op, const char* kernel) {
  const cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) return status::ok();
  const status_code code = e == cudaErrorMemoryAllocation ? status_code::out_of_memory : status_code::device_error;
  return {code, std::string(op) + ": " + kernel + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")"};
}

/// Raises `kernel`'s dynamic shared-memory limit to `bytes` on the current device, once per device
/// (below 64; above, on every call): the attribute call costs host time that showed in short ops.
/// most_shared: also asks for the largest shared-memory carveout of the SM's unified L1, for a
/// kernel that needs several blocks of large shared memory on one SM (left to itself the driver
/// may pick a carveout that fits fewer).
template <auto kernel>
status allow_shared_memory(std::size_t bytes, bool most_shared = false) {
  static std::atomic<std::uint64_t> raised{0};  // a bit per device
  int device = 0;
  TANDEM_CUDA_CHECK(cudaGetDevice(&device));
  const std::uint64_t bit = device >= 0 && device < 64 ? std::uint64_t{1} << device : 0;
  if (bit != 0 && (raised.load(std::memory_order_acquire) & bit) != 0) return status::ok();
  TANDEM_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  if (most_shared)
    TANDEM_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                           static_cast<int>(cudaSharedmemCarveoutMaxShared)));
  raised.fetch_or(bit, std::memory_order_release);
  return status::ok();
}

/// Programmatic dependent launch (Hopper): kernel<<<grid, block, shared_bytes, stream>>>(args...)
/// may start while the kernel before it on the stream finishes (once each of that kernel's blocks
/// has called allow_dependents() or exited), so its launch's latency is hidden behind the other's
/// tail. The dependent must call wait_for_prior_grid() before it reads or writes anything the
/// kernel before it touches: that waits until the kernel has completed and its writes are visible.
template <class... Params, class... Args>
cudaError_t launch_dependent(void (*kernel)(Params...), unsigned grid, unsigned block, std::size_t shared_bytes,
                             cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(grid);
  config.blockDim = dim3(block);
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

/// In a kernel launched by launch_dependent: waits until the kernel before it on the stream has
/// completed, its writes visible (a no-op in a kernel launched otherwise).
__device__ __forceinline__ void wait_for_prior_grid() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
/// In the kernel before a launch_dependent: this block lets the dependent start (the dependent
/// still waits for the whole kernel before it touches its memory).
__device__ __forceinline__ void allow_dependents() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }

/// Blocks for a grid-stride loop over n items at `threads` per block: enough to fill the GPU
/// several times over, never more than n needs, at least 1.
inline unsigned blocks_for(std::int64_t n, int threads, std::int64_t cap = 132 * 32) {
  const std::int64_t need = (n + threads - 1) / threads;
  return static_cast<unsigned>(std::max<std::int64_t>(1, std::min(need, cap)));
}

}  // namespace tandem::gpu::ops::cuda
