// Backend dispatch: an op's public function checks its arguments, then calls
// dispatch_float(op, x, [&](auto zero) { return cpu::thing<decltype(zero)>(...); }) which runs the
// CPU implementation in float32 or float64 (the reference) according to x's dtype and device, and
// refuses devices and dtypes whose backend is not built, naming the op.
#pragma once

#include <string>
#include <string_view>

#include "gpu/core/status.h"
#include "gpu/core/tensor.h"

namespace tandem::gpu::ops {

template <class F>
status dispatch_float(std::string_view op, const tensor& x, F&& cpu_impl) {
  if (!x.dev().is_cpu())
    return {status_code::unsupported, std::string(op) + ": no CUDA implementation yet (tensor on " +
                                          x.dev().to_string() + ")"};
  switch (x.type()) {
    case dtype::float32: return cpu_impl(float{});
    case dtype::float64: return cpu_impl(double{});
    default:
      return {status_code::unsupported, std::string(op) + ": the CPU backend computes in float32 or float64, got " +
                                            x.describe()};
  }
}

}  // namespace tandem::gpu::ops
