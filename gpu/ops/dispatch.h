// Backend dispatch: an op's public function checks its arguments, then calls
//
//   dispatch_float(ctx, op, x,
//                  [&](auto zero) { return cpu::thing<decltype(zero)>(...); },   // the CPU
//                  TANDEM_ON_CUDA(cuda::thing(ctx, ...)));                      // CUDA
//
// which checks that x lives on the context's device, then runs the CPU implementation in float32
// or float64 (the reference) according to x's dtype, or the CUDA implementation with float32 or
// bfloat16 storage, and refuses devices and dtypes whose backend is not built, naming the op.
// Ops whose tensors are not all floating point call on_backend() for the same device checks.
//
// TANDEM_ON_CUDA(expr) is a lambda taking the storage dtype (`storage`) and returning expr; in a
// build without the CUDA backend it returns unsupported naming the op instead (the CUDA
// functions are then never referenced), so the op files carry no #if of their own.
#pragma once

#include <string>
#include <string_view>

#include "gpu/core/dtype.h"
#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"
#include "gpu/core/tensor.h"

namespace tandem::gpu::ops {

/// unsupported "<op>: this build has no CUDA backend (...)".
status cuda_not_built(std::string_view op, const device& dev);

/// ok when `x` is on the context's device and the build has that device's backend.
status on_backend(const exec_context& ctx, std::string_view op, const tensor& x);

/// The dtype of saved statistics (inverse RMS, log-sum-exp) next to floating storage `storage`:
/// float64 for the float64 reference, float32 otherwise (bfloat16 would lose the statistics'
/// precision the backward needs).
inline dtype statistics_type(dtype storage) { return storage == dtype::float64 ? dtype::float64 : dtype::float32; }

template <class CpuImpl, class CudaImpl>
status dispatch_float(const exec_context& ctx, std::string_view op, const tensor& x, CpuImpl&& cpu_impl,
                      CudaImpl&& cuda_impl) {
  if (status s = on_backend(ctx, op, x); !s) return s;
  if (ctx.dev.is_cpu()) {
    switch (x.type()) {
      case dtype::float32: return cpu_impl(float{});
      case dtype::float64: return cpu_impl(double{});
      default:
        return {status_code::unsupported, std::string(op) + ": the CPU backend computes in float32 or float64, got " +
                                              x.describe()};
    }
  }
  switch (x.type()) {
    case dtype::float32:
    case dtype::bfloat16: return cuda_impl(x.type());
    default:
      return {status_code::unsupported, std::string(op) + ": the CUDA backend stores float32 or bfloat16, got " +
                                            x.describe()};
  }
}

}  // namespace tandem::gpu::ops

#if TANDEM_HAVE_CUDA
#define TANDEM_ON_CUDA(...) [&](::tandem::gpu::dtype storage) -> ::tandem::gpu::status { \
  (void)storage;                                                                         \
  return __VA_ARGS__;                                                                    \
}
#else
#define TANDEM_ON_CUDA(...) [&](::tandem::gpu::dtype) -> ::tandem::gpu::status { \
  return ::tandem::gpu::ops::cuda_not_built(op, ctx.dev);                        \
}
#endif
