// A data-dependent branch inside a CUDA graph capture: which of two pieces of work runs is decided
// on the device at each replay, with no host wait. The capture gets an if/else conditional node
// (CUDA 12.4+) whose two bodies are captured from the work, and a kernel enqueued before it sets
// the node's condition.
//
//   capturing ctx.stream --capture_branch--> decide(handle) captured on ctx.stream
//     --> conditional node [when_set | otherwise], each body captured from a side stream
//     --> the capture goes on after the node (later work depends on it)
//
// At each replay, `decide`'s kernel calls cudaGraphSetConditional(handle, value) (a device
// function of the CUDA runtime); nonzero runs when_set's body, zero otherwise's. A body may hold
// what a conditional body may: kernels, memsets and copies between device buffers, cuBLASLt
// products (whose choices were made outside the capture: cublaslt_gemm.h's gemm_prepare). Outside
// a capture there is nothing to build: the caller reads its decision back and runs one branch.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <string_view>

#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"

namespace tandem::gpu::ops::cuda {

using branch_work = std::function<status(const exec_context&)>;

/// Whether ctx.stream is capturing (device_error when the query fails).
result<bool> capturing(const exec_context& ctx);

/// In a capture on ctx.stream (invalid_argument otherwise): `decide(handle)` enqueues on ctx.stream
/// the kernel that sets the condition, then the node whose bodies are `when_set` and `otherwise`,
/// each given ctx with a side stream whose work lands in that body. Errors name `op`: the work's
/// own, or device_error naming the graph call that failed.
status capture_branch(const exec_context& ctx, std::string_view op,
                      const std::function<status(cudaGraphConditionalHandle)>& decide, const branch_work& when_set,
                      const branch_work& otherwise);

}  // namespace tandem::gpu::ops::cuda
