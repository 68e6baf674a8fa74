// Sampling: checks of the parameters, shapes, dtypes, devices and coordinate count, then the CPU
// kernel (gpu/ops/cpu/sampling.h) or the CUDA kernel (gpu/ops/cuda/sampling.h).
#include "gpu/ops/sampling.h"

#include <limits>
#include <string>

#include "gpu/ops/cpu/sampling.h"
#include "gpu/ops/cuda/sampling.h"
#include "gpu/ops/dispatch.h"
#include "gpu/ops/op_check.h"

namespace tandem::gpu::ops {

status sampling_forward(const exec_context& ctx, const tensor& logits, const sampling_params& params,
                        std::span<const rng_coordinates> coordinates, const tensor& tokens, const tensor& logprobs) {
  constexpr const char* op = "sampling_forward";
  TANDEM_RETURN_IF_ERROR(expect_shape(logits, op, "logits", {any, any}));
  const std::int64_t rows = logits.dim(0), v = logits.dim(1);
  TANDEM_RETURN_IF_ERROR(require(v >= 1 && v <= std::numeric_limits<std::int32_t>::max(), op,
                                 "logits: the vocabulary size " + std::to_string(v) + " is outside [1, 2^31)"));
  TANDEM_RETURN_IF_ERROR(expect_shape(tokens, op, "tokens", {rows}));
  TANDEM_RETURN_IF_ERROR(expect_type(tokens, op, "tokens", dtype::int32));
  TANDEM_RETURN_IF_ERROR(expect_same_device(tokens, logits, op, "tokens"));
  TANDEM_RETURN_IF_ERROR(expect_shape(logprobs, op, "logprobs", {rows}));
  // The logits' dtype, or float32 next to bfloat16 logits (CUDA); on the CPU the two agree.
  const dtype statistics = statistics_type(logits.type());
  TANDEM_RETURN_IF_ERROR(
      expect_type(logprobs, op, "logprobs", logprobs.type() == statistics ? statistics : logits.type()));
  TANDEM_RETURN_IF_ERROR(expect_same_device(logprobs, logits, op, "logprobs"));
  TANDEM_RETURN_IF_ERROR(require(static_cast<std::int64_t>(coordinates.size()) == rows, op,
                                 "coordinates: expected " + std::to_string(rows) + " entries (one per row), got " +
                                     std::to_string(coordinates.size())));
  TANDEM_RETURN_IF_ERROR(check_sampling_params(op, params, true));
  return dispatch_float(ctx, op, logits, [&](auto zero) {
    using T = decltype(zero);
    const std::int64_t bad = cpu::sampling_forward<T>(logits.as<const T>(), rows, v, params, coordinates.data(),
                                                      tokens.as<std::int32_t>(), logprobs.as<T>());
    return require(bad < 0, op, "logits: row " + std::to_string(bad) + " holds a non-finite value");
  }, TANDEM_ON_CUDA(cuda::sampling_forward(ctx, storage, logits, params, coordinates, tokens, logprobs)));
}

}  // namespace tandem::gpu::ops
