// The execution context of the CUDA tests: cuda:0, its default stream, and one workspace shared
// by every test of the program.
#pragma once

#include "gpu/core/device.h"
#include "gpu/core/exec_context.h"

namespace tandem::test::cuda {

inline gpu::exec_context test_context() {
  gpu::exec_context ctx;
  ctx.dev = gpu::device::cuda(0);
  // Leaked on purpose: freeing CUDA memory from a static destructor races the runtime's own
  // teardown at exit.
  static gpu::workspace* scratch = new gpu::workspace(gpu::device::cuda(0));
  ctx.scratch = scratch;
  return ctx;
}

}  // namespace tandem::test::cuda
