// Sums of squares by range: checks and dispatch to the CPU and CUDA kernels.
#include "gpu/ops/sum_squares.h"

#include <string>

#include "gpu/ops/cpu/sum_squares.h"
#include "gpu/ops/cuda/sum_squares.h"
#include "gpu/ops/dispatch.h"
#include "gpu/ops/op_check.h"

namespace tandem::gpu::ops {

status sum_squares(const exec_context& ctx, const tensor& x, std::span<const element_range> ranges, std::span<double> sums) {
  constexpr const char* op = "sum_squares";
  TANDEM_RETURN_IF_ERROR(expect_shape(x, op, "x", {any}));
  TANDEM_RETURN_IF_ERROR(require(x.is_contiguous(), op, "x must be contiguous"));
  TANDEM_RETURN_IF_ERROR(require(sums.size() == ranges.size(), op,
                                 "sums holds " + std::to_string(sums.size()) + " values for " + std::to_string(ranges.size()) + " ranges"));
  const std::int64_t n = x.numel();
  for (std::size_t r = 0; r < ranges.size(); ++r) {
    const element_range& e = ranges[r];
    TANDEM_RETURN_IF_ERROR(require(e.offset >= 0 && e.count >= 0 && e.offset <= n - e.count, op,
                                   "range " + std::to_string(r) + " [" + std::to_string(e.offset) + ", +" + std::to_string(e.count) +
                                       ") is outside x's " + std::to_string(n) + " elements"));
  }
  return dispatch_float(ctx, op, x, [&](auto zero) {
    using T = decltype(zero);
    cpu::sum_squares<T>(x.as<const T>(), ranges, sums);
    return status::ok();
  }, TANDEM_ON_CUDA(cuda::sum_squares(ctx, storage, x, ranges, sums)));
}

}  // namespace tandem::gpu::ops
