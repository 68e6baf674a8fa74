// Policy-gradient loss: argument, setting and value checks, then dispatch to the CPU kernels or
// the CUDA kernels (gpu/ops/cuda/pg_loss.h: float32 only).
#include "gpu/ops/pg_loss.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "gpu/core/memory.h"
#include "gpu/ops/cpu/pg_loss.h"
#include "gpu/ops/cuda/pg_loss.h"
#include "gpu/ops/dispatch.h"
#include "gpu/ops/op_check.h"

namespace tandem::gpu::ops {
namespace {

/// Shapes, dtypes and devices of the inputs.
status check_inputs(const char* op, const pg_loss_inputs& in, const pg_loss_settings& s) {
  TANDEM_RETURN_IF_ERROR(expect_shape(in.lp_cur, op, "lp_cur", {any}));
  const dtype type = in.lp_cur.type();
  if (type != dtype::float32 && type != dtype::float64)
    return require(false, op, "lp_cur: expected dtype float32 or float64, got " + in.lp_cur.describe());
  const std::int64_t n = in.lp_cur.dim(0);
  auto per_token = [&](const tensor& t, const char* name) {
    TANDEM_RETURN_IF_ERROR(expect_shape(t, op, name, {n}));
    TANDEM_RETURN_IF_ERROR(expect_type(t, op, name, type));
    return expect_same_device(t, in.lp_cur, op, name);
  };
  if (!s.force_on_policy_ratio || !in.lp_prev.empty()) TANDEM_RETURN_IF_ERROR(per_token(in.lp_prev, "lp_prev"));
  TANDEM_RETURN_IF_ERROR(per_token(in.lp_gen, "lp_gen"));
  TANDEM_RETURN_IF_ERROR(per_token(in.advantages, "advantages"));
  TANDEM_RETURN_IF_ERROR(per_token(in.mask, "mask"));
  if (s.kl_beta > 0) TANDEM_RETURN_IF_ERROR(per_token(in.lp_ref, "lp_ref"));
  TANDEM_RETURN_IF_ERROR(expect_shape(in.seq_offsets, op, "seq_offsets", {any}));
  TANDEM_RETURN_IF_ERROR(expect_type(in.seq_offsets, op, "seq_offsets", dtype::int32));
  return expect_same_device(in.seq_offsets, in.lp_cur, op, "seq_offsets");
}

/// Value ranges of the settings and of the global count the chosen normalisation divides by.
status check_settings(const char* op, const pg_loss_inputs& in, const pg_loss_settings& s) {
  TANDEM_RETURN_IF_ERROR(require(s.ratio_clip_min >= 0 && s.ratio_clip_min <= 1, op,
                                 "ratio_clip_min must be in [0, 1], got " + number(s.ratio_clip_min)));
  TANDEM_RETURN_IF_ERROR(require(std::isfinite(s.ratio_clip_max) && s.ratio_clip_max >= 0, op,
                                 "ratio_clip_max must be finite and >= 0, got " + number(s.ratio_clip_max)));
  if (s.ratio_clip_c)
    TANDEM_RETURN_IF_ERROR(require(*s.ratio_clip_c > 1, op, "ratio_clip_c must be > 1, got " + number(*s.ratio_clip_c)));
  if (s.importance != importance_correction::off && s.importance != importance_correction::plain) {
    TANDEM_RETURN_IF_ERROR(
        require(s.is_ratio_max > 0, op, "is_ratio_max must be > 0, got " + number(s.is_ratio_max)));
    TANDEM_RETURN_IF_ERROR(require(s.is_ratio_min >= 0 && s.is_ratio_min <= s.is_ratio_max, op,
                                   "is_ratio_min must be in [0, is_ratio_max], got " + number(s.is_ratio_min)));
  }
  TANDEM_RETURN_IF_ERROR(require(std::isfinite(s.kl_beta) && s.kl_beta >= 0, op,
                                 "kl_beta must be finite and >= 0, got " + number(s.kl_beta)));
  TANDEM_RETURN_IF_ERROR(
      require(s.kl_input_clamp > 0, op, "kl_input_clamp must be > 0, got " + number(s.kl_input_clamp)));
  TANDEM_RETURN_IF_ERROR(
      require(s.kl_output_clamp > 0, op, "kl_output_clamp must be > 0, got " + number(s.kl_output_clamp)));
  if (s.token_level_loss)
    return require(std::isfinite(in.global_token_count) && in.global_token_count > 0, op,
                   "global_token_count must be finite and > 0 for a token-level loss, got " +
                       number(in.global_token_count));
  return require(std::isfinite(in.global_sequence_count) && in.global_sequence_count > 0, op,
                 "global_sequence_count must be finite and > 0 for a sequence-level loss, got " +
                     number(in.global_sequence_count));
}

/// Offsets rise from 0 to the token count; mask values are 0 or 1 (host memory only).
template <class T>
status check_values(const char* op, const pg_loss_inputs& in) {
  const std::int64_t n = in.lp_cur.dim(0), count = in.seq_offsets.dim(0);
  const auto* o = in.seq_offsets.as<const std::int32_t>();
  TANDEM_RETURN_IF_ERROR(require(o[0] == 0, op, "seq_offsets[0] must be 0, got " + std::to_string(o[0])));
  for (std::int64_t s = 1; s < count; ++s)
    if (o[s] < o[s - 1])
      return require(false, op,
                     "seq_offsets must not decrease: seq_offsets[" + std::to_string(s) + "] = " + std::to_string(o[s]) +
                         " after " + std::to_string(o[s - 1]));
  TANDEM_RETURN_IF_ERROR(require(o[count - 1] == n, op,
                                 "seq_offsets[" + std::to_string(count - 1) + "] must equal the token count " +
                                     std::to_string(n) + ", got " + std::to_string(o[count - 1])));
  const T* m = in.mask.as<const T>();
  for (std::int64_t i = 0; i < n; ++i)
    if (m[i] != T(0) && m[i] != T(1))
      return require(false, op,
                     "mask: values must be 0 or 1, got " + number(static_cast<double>(m[i])) + " at token " +
                         std::to_string(i));
  return status::ok();
}

/// check_values on host copies of a device batch's offsets and mask (float32): the CUDA forward
/// found an invalid value, this names it as the CPU does.
template <class T>
status check_values_copied(const char* op, const pg_loss_inputs& in) {
  std::vector<std::int32_t> offsets(static_cast<std::size_t>(in.seq_offsets.dim(0)));
  std::vector<T> mask(static_cast<std::size_t>(in.mask.dim(0)));
  TANDEM_RETURN_IF_ERROR(copy_to_host(in.seq_offsets.dev(), offsets.data(), in.seq_offsets.data(),
                                      in.seq_offsets.bytes()));
  TANDEM_RETURN_IF_ERROR(copy_to_host(in.mask.dev(), mask.data(), in.mask.data(), in.mask.bytes()));
  pg_loss_inputs host = in;
  host.seq_offsets = tensor::contiguous(offsets.data(), dtype::int32, std::vector<std::int64_t>{in.seq_offsets.dim(0)});
  host.mask = tensor::contiguous(mask.data(), in.mask.type(), std::vector<std::int64_t>{in.mask.dim(0)});
  return check_values<T>(op, host);
}

}  // namespace

status pg_loss_forward(const exec_context& ctx, const pg_loss_inputs& in, const pg_loss_settings& settings, const tensor& loss,
                       pg_loss_metrics* metrics) {
  constexpr const char* op = "pg_loss_forward";
  TANDEM_RETURN_IF_ERROR(check_inputs(op, in, settings));
  TANDEM_RETURN_IF_ERROR(expect_shape(loss, op, "loss", {1}));
  TANDEM_RETURN_IF_ERROR(expect_type(loss, op, "loss", in.lp_cur.type()));
  TANDEM_RETURN_IF_ERROR(expect_same_device(loss, in.lp_cur, op, "loss"));
  TANDEM_RETURN_IF_ERROR(check_settings(op, in, settings));
  return dispatch_float(ctx, op, in.lp_cur, [&](auto zero) {
    using T = decltype(zero);
    TANDEM_RETURN_IF_ERROR(check_values<T>(op, in));
    pg_loss_metrics local;
    cpu::pg_loss_forward<T>(in, settings, loss.as<T>(), metrics ? *metrics : local);
    return status::ok();
  }, TANDEM_ON_CUDA([&]() -> status {
    // With metrics the CUDA forward synchronises and reports invalid offsets or mask values.
    bool bad_values = false;
    TANDEM_RETURN_IF_ERROR(cuda::pg_loss_forward(ctx, storage, in, settings, loss, metrics, &bad_values));
    return bad_values ? check_values_copied<float>(op, in) : status::ok();
  }()));
}

status pg_loss_backward(const exec_context& ctx, const pg_loss_inputs& in, const pg_loss_settings& settings, double dloss,
                        const tensor& d_lp_cur, bool accumulate) {
  constexpr const char* op = "pg_loss_backward";
  TANDEM_RETURN_IF_ERROR(check_inputs(op, in, settings));
  TANDEM_RETURN_IF_ERROR(expect_shape(d_lp_cur, op, "d_lp_cur", {in.lp_cur.dim(0)}));
  TANDEM_RETURN_IF_ERROR(expect_type(d_lp_cur, op, "d_lp_cur", in.lp_cur.type()));
  TANDEM_RETURN_IF_ERROR(expect_same_device(d_lp_cur, in.lp_cur, op, "d_lp_cur"));
  TANDEM_RETURN_IF_ERROR(check_settings(op, in, settings));
  TANDEM_RETURN_IF_ERROR(require(std::isfinite(dloss), op, "dloss must be finite, got " + number(dloss)));
  return dispatch_float(ctx, op, in.lp_cur, [&](auto zero) {
    using T = decltype(zero);
    TANDEM_RETURN_IF_ERROR(check_values<T>(op, in));
    cpu::pg_loss_backward<T>(in, settings, dloss, d_lp_cur.as<T>(), accumulate);
    return status::ok();
  }, TANDEM_ON_CUDA(cuda::pg_loss_backward(ctx, storage, in, settings, dloss, d_lp_cur, accumulate)));
}

}  // namespace tandem::gpu::ops
