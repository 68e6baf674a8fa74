// Sampling: checks of the parameters, shapes, dtypes, devices and coordinate count, then the CPU
// kernel (gpu/ops/cpu/sampling.h) or the CUDA kernel (gpu/ops/cuda/sampling.h).
#include "gpu/ops/sampling.h"

#include <cstddef>
#include <limits>
#include <string>

#include "gpu/ops/cpu/sampling.h"
#include "gpu/ops/cuda/sampling.h"
#include "gpu/ops/dispatch.h"
#include "gpu/ops/op_check.h"

namespace tandem::gpu::ops {
namespace {

// The layout sampling_forward's coordinate tensor promises: I32 [rows, 8] read as rng_coordinates.
static_assert(sizeof(rng_coordinates) == 8 * sizeof(std::int32_t));
static_assert(offsetof(rng_coordinates, seed) == 0 && offsetof(rng_coordinates, step) == 8 &&
              offsetof(rng_coordinates, round) == 12 && offsetof(rng_coordinates, prompt) == 16 &&
              offsetof(rng_coordinates, sample) == 20 && offsetof(rng_coordinates, position) == 24);

/// The checks both forms share, with `rows` coordinates given.
status check_sampling(const char* op, const tensor& logits, const sampling_params& params, std::int64_t coordinates,
                      const tensor& tokens, const tensor& logprobs) {
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
  TANDEM_RETURN_IF_ERROR(require(coordinates == rows, op,
                                 "coordinates: expected " + std::to_string(rows) + " entries (one per row), got " +
                                     std::to_string(coordinates)));
  return check_sampling_params(op, params, true);
}

/// Runs the backend's kernel over coordinates at `at` (host memory on the CPU; on CUDA host
/// memory when `on_device` is false, device memory else).
status run_sampling(const exec_context& ctx, const char* op, const tensor& logits, const sampling_params& params,
                    const rng_coordinates* at, bool on_device, const tensor& tokens, const tensor& logprobs) {
  const std::int64_t rows = logits.dim(0), v = logits.dim(1);
  return dispatch_float(ctx, op, logits, [&](auto zero) {
    using T = decltype(zero);
    const std::int64_t bad = cpu::sampling_forward<T>(logits.as<const T>(), rows, v, params, at, tokens.as<std::int32_t>(),
                                                      logprobs.as<T>());
    return require(bad < 0, op, "logits: row " + std::to_string(bad) + " holds a non-finite value");
  }, TANDEM_ON_CUDA(cuda::sampling_forward(ctx, storage, logits, params, at, on_device, tokens, logprobs)));
}

}  // namespace

status sampling_forward(const exec_context& ctx, const tensor& logits, const sampling_params& params,
                        std::span<const rng_coordinates> coordinates, const tensor& tokens, const tensor& logprobs) {
  constexpr const char* op = "sampling_forward";
  TANDEM_RETURN_IF_ERROR(check_sampling(op, logits, params, static_cast<std::int64_t>(coordinates.size()), tokens, logprobs));
  return run_sampling(ctx, op, logits, params, coordinates.data(), false, tokens, logprobs);
}

status sampling_forward(const exec_context& ctx, const tensor& logits, const sampling_params& params, const tensor& coordinates,
                        const tensor& tokens, const tensor& logprobs) {
  constexpr const char* op = "sampling_forward";
  TANDEM_RETURN_IF_ERROR(expect_shape(coordinates, op, "coordinates", {any, 8}));
  TANDEM_RETURN_IF_ERROR(expect_type(coordinates, op, "coordinates", dtype::int32));
  TANDEM_RETURN_IF_ERROR(expect_same_device(coordinates, logits, op, "coordinates"));
  TANDEM_RETURN_IF_ERROR(check_sampling(op, logits, params, coordinates.dim(0), tokens, logprobs));
  return run_sampling(ctx, op, logits, params, reinterpret_cast<const rng_coordinates*>(coordinates.data()), true, tokens,
                      logprobs);
}

}  // namespace tandem::gpu::ops
