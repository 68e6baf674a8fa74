// Scoring: checks of the sampling parameters, shapes, dtypes, devices and target ids, then the
// CPU kernels (gpu/ops/cpu/logprobs.h) or the CUDA kernels (gpu/ops/cuda/logprobs.h).
#include "gpu/ops/logprobs.h"

#include <cmath>
#include <limits>
#include <sstream>
#include <string>

#include "gpu/ops/cpu/logprobs.h"
#include "gpu/ops/cuda/logprobs.h"
#include "gpu/ops/dispatch.h"
#include "gpu/ops/op_check.h"

namespace tandem::gpu::ops {
namespace {

/// The dtype a per-row output (logprobs, entropy, dlogprobs) must have: the logits' dtype, or
/// float32 next to bfloat16 logits (the CUDA backend's statistics dtype); on the CPU the two agree.
dtype row_type(const tensor& logits, const tensor& out) {
  const dtype statistics = statistics_type(logits.type());
  return out.type() == statistics ? statistics : logits.type();
}

/// Shapes, dtypes and devices shared by the forward and the backward.
status check_rows(const char* op, const tensor& logits, const tensor& targets) {
  TANDEM_RETURN_IF_ERROR(expect_shape(logits, op, "logits", {any, any}));
  const std::int64_t v = logits.dim(1);
  TANDEM_RETURN_IF_ERROR(require(v >= 1 && v <= std::numeric_limits<std::int32_t>::max(), op,
                                 "logits: the vocabulary size " + std::to_string(v) + " is outside [1, 2^31)"));
  TANDEM_RETURN_IF_ERROR(expect_shape(targets, op, "targets", {logits.dim(0)}));
  TANDEM_RETURN_IF_ERROR(expect_type(targets, op, "targets", dtype::int32));
  return expect_same_device(targets, logits, op, "targets");
}

/// Every target id in [0, v); host memory only (called inside dispatch).
status check_targets(const char* op, const tensor& targets, std::int64_t v) {
  const auto* ids = targets.as<const std::int32_t>();
  for (std::int64_t r = 0; r < targets.dim(0); ++r)
    if (ids[r] < 0 || ids[r] >= v)
      return require(false, op,
                     "targets: id " + std::to_string(ids[r]) + " at row " + std::to_string(r) + " is outside [0, " +
                         std::to_string(v) + ")");
  return status::ok();
}

status non_finite(const char* op, std::int64_t row) {
  return require(row < 0, op, "logits: row " + std::to_string(row) + " holds a non-finite value");
}

}  // namespace

status check_sampling_params(std::string_view op, const sampling_params& params, bool greedy_allowed) {
  const double t = params.temperature;
  if (greedy_allowed)
    TANDEM_RETURN_IF_ERROR(
        require(std::isfinite(t) && t >= 0, op, "temperature must be >= 0 (0: greedy), got " + number(t)));
  else
    TANDEM_RETURN_IF_ERROR(require(std::isfinite(t) && t > 0, op, "temperature must be > 0, got " + number(t)));
  TANDEM_RETURN_IF_ERROR(require(params.top_k >= 0, op,
                                 "top_k must be >= 0 (0: no top-k), got " + std::to_string(params.top_k)));
  return require(params.top_p > 0 && params.top_p <= 1, op, "top_p must be in (0, 1], got " + number(params.top_p));
}

status logprobs_forward(const exec_context& ctx, const tensor& logits, const tensor& targets, const sampling_params& params,
                        const tensor& logprobs, const tensor& entropy) {
  constexpr const char* op = "logprobs_forward";
  TANDEM_RETURN_IF_ERROR(check_rows(op, logits, targets));
  const std::int64_t rows = logits.dim(0), v = logits.dim(1);
  TANDEM_RETURN_IF_ERROR(expect_shape(logprobs, op, "logprobs", {rows}));
  TANDEM_RETURN_IF_ERROR(expect_type(logprobs, op, "logprobs", row_type(logits, logprobs)));
  TANDEM_RETURN_IF_ERROR(expect_same_device(logprobs, logits, op, "logprobs"));
  if (!entropy.empty()) {
    TANDEM_RETURN_IF_ERROR(expect_shape(entropy, op, "entropy", {rows}));
    TANDEM_RETURN_IF_ERROR(expect_type(entropy, op, "entropy", logprobs.type()));
    TANDEM_RETURN_IF_ERROR(expect_same_device(entropy, logits, op, "entropy"));
  }
  TANDEM_RETURN_IF_ERROR(check_sampling_params(op, params, false));
  return dispatch_float(ctx, op, logits, [&](auto zero) {
    using T = decltype(zero);
    TANDEM_RETURN_IF_ERROR(check_targets(op, targets, v));
    return non_finite(op, cpu::logprobs_forward<T>(logits.as<const T>(), targets.as<const std::int32_t>(), rows, v,
                                                   params, logprobs.as<T>(),
                                                   entropy.empty() ? nullptr : entropy.as<T>()));
  }, TANDEM_ON_CUDA(cuda::logprobs_forward(ctx, storage, logits, targets, params, logprobs, entropy)));
}

status logprobs_backward(const exec_context& ctx, const tensor& logits, const tensor& targets, const sampling_params& params,
                         const tensor& dlogprobs, const tensor& dlogits, bool accumulate) {
  constexpr const char* op = "logprobs_backward";
  TANDEM_RETURN_IF_ERROR(check_rows(op, logits, targets));
  const std::int64_t rows = logits.dim(0), v = logits.dim(1);
  TANDEM_RETURN_IF_ERROR(expect_shape(dlogprobs, op, "dlogprobs", {rows}));
  TANDEM_RETURN_IF_ERROR(expect_type(dlogprobs, op, "dlogprobs", row_type(logits, dlogprobs)));
  TANDEM_RETURN_IF_ERROR(expect_same_device(dlogprobs, logits, op, "dlogprobs"));
  TANDEM_RETURN_IF_ERROR(expect_shape(dlogits, op, "dlogits", {rows, v}));
  TANDEM_RETURN_IF_ERROR(expect_type(dlogits, op, "dlogits", logits.type()));
  TANDEM_RETURN_IF_ERROR(expect_same_device(dlogits, logits, op, "dlogits"));
  TANDEM_RETURN_IF_ERROR(check_sampling_params(op, params, false));
  return dispatch_float(ctx, op, logits, [&](auto zero) {
    using T = decltype(zero);
    TANDEM_RETURN_IF_ERROR(check_targets(op, targets, v));
    return non_finite(op, cpu::logprobs_backward<T>(logits.as<const T>(), targets.as<const std::int32_t>(),
                                                    dlogprobs.as<const T>(), rows, v, params, dlogits.as<T>(),
                                                    accumulate));
  }, TANDEM_ON_CUDA(cuda::logprobs_backward(ctx, storage, logits, targets, params, dlogprobs, dlogits, accumulate)));
}

}  // namespace tandem::gpu::ops
