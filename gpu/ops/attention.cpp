// Packed causal attention: argument checks (shapes, dtypes, devices, heads, offsets, options) and
// dispatch to the CPU reference or the CUDA kernels (which cannot read the offsets' values on the
// host: see gpu/ops/cuda/attention.h).
#include "gpu/ops/attention.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "gpu/ops/cpu/attention.h"
#include "gpu/ops/cuda/attention.h"
#include "gpu/ops/dispatch.h"
#include "gpu/ops/op_check.h"
#include "gpu/ops/scratch.h"

namespace tandem::gpu::ops {
namespace {

using named = std::pair<const tensor*, const char*>;

/// Checks q, k, v, the offsets' shape and dtype, and the options; fills dims (num_seqs included).
status check_inputs(const char* op, const tensor& q, const tensor& k, const tensor& v, const tensor& cu_seqlens,
                    const attention_options& options, cpu::attention_dims& dims) {
  TANDEM_RETURN_IF_ERROR(expect_shape(q, op, "q", {any, any, any}));
  const std::int64_t tokens = q.dim(0), heads = q.dim(1), d = q.dim(2);
  TANDEM_RETURN_IF_ERROR(expect_shape(k, op, "k", {tokens, any, d}));
  const std::int64_t kv_heads = k.dim(1);
  TANDEM_RETURN_IF_ERROR(expect_shape(v, op, "v", {tokens, kv_heads, d}));
  TANDEM_RETURN_IF_ERROR(require(kv_heads > 0, op, "k and v have no kv heads"));
  TANDEM_RETURN_IF_ERROR(require(heads % kv_heads == 0, op,
                                 "q has " + std::to_string(heads) + " heads, not a multiple of the " +
                                     std::to_string(kv_heads) + " kv heads of k and v"));
  TANDEM_RETURN_IF_ERROR(expect_shape(cu_seqlens, op, "cu_seqlens", {any}));
  TANDEM_RETURN_IF_ERROR(expect_type(cu_seqlens, op, "cu_seqlens", dtype::int32));
  TANDEM_RETURN_IF_ERROR(expect_type(k, op, "k", q.type()));
  TANDEM_RETURN_IF_ERROR(expect_type(v, op, "v", q.type()));
  for (const auto& [t, name] : {named{&k, "k"}, named{&v, "v"}, named{&cu_seqlens, "cu_seqlens"}})
    TANDEM_RETURN_IF_ERROR(expect_same_device(*t, q, op, name));
  TANDEM_RETURN_IF_ERROR(require(std::isfinite(options.scaling), op, "scaling must be finite"));
  TANDEM_RETURN_IF_ERROR(require(options.sliding_window >= 0, op,
                                 "sliding_window must be >= 0, got " + std::to_string(options.sliding_window)));
  dims = {tokens, heads, kv_heads, d, cu_seqlens.dim(0) - 1, 0};
  return status::ok();
}

/// The offsets' values (read on the host, so only after dispatch has refused device tensors):
/// 0 first, never decreasing, the token count last.
status check_offsets(const char* op, const tensor& cu_seqlens, std::int64_t tokens) {
  const std::int32_t* cu = cu_seqlens.as<std::int32_t>();
  const std::int64_t n = cu_seqlens.dim(0);
  TANDEM_RETURN_IF_ERROR(
      require(cu[0] == 0, op, "cu_seqlens: the first offset is " + std::to_string(cu[0]) + ", expected 0"));
  for (std::int64_t i = 1; i < n; ++i)
    TANDEM_RETURN_IF_ERROR(require(cu[i] >= cu[i - 1], op,
                                   "cu_seqlens: offsets decrease at index " + std::to_string(i) + " (" +
                                       std::to_string(cu[i]) + " after " + std::to_string(cu[i - 1]) + ")"));
  return require(cu[n - 1] == tokens, op,
                 "cu_seqlens: the last offset is " + std::to_string(cu[n - 1]) + ", expected the token count " +
                     std::to_string(tokens));
}

/// The longest sequence of (already checked) offsets.
std::int64_t longest_sequence(const tensor& cu_seqlens) {
  const std::int32_t* cu = cu_seqlens.as<std::int32_t>();
  std::int64_t longest = 0;
  for (std::int64_t s = 0; s + 1 < cu_seqlens.numel(); ++s) longest = std::max<std::int64_t>(longest, cu[s + 1] - cu[s]);
  return longest;
}

}  // namespace

status attention_forward(const exec_context& ctx, const tensor& q, const tensor& k, const tensor& v, const tensor& cu_seqlens, const tensor& out,
                         const tensor& lse, const attention_options& options) {
  constexpr const char* op = "attention_forward";
  cpu::attention_dims dims{};
  TANDEM_RETURN_IF_ERROR(check_inputs(op, q, k, v, cu_seqlens, options, dims));
  TANDEM_RETURN_IF_ERROR(expect_shape(out, op, "out", {dims.tokens, dims.heads, dims.head_dim}));
  TANDEM_RETURN_IF_ERROR(expect_shape(lse, op, "lse", {dims.tokens, dims.heads}));
  TANDEM_RETURN_IF_ERROR(expect_type(out, op, "out", q.type()));
  TANDEM_RETURN_IF_ERROR(expect_type(lse, op, "lse", statistics_type(q.type())));
  TANDEM_RETURN_IF_ERROR(expect_same_device(out, q, op, "out"));
  TANDEM_RETURN_IF_ERROR(expect_same_device(lse, q, op, "lse"));
  return dispatch_float(ctx, op, q, [&](auto zero) {
    using T = decltype(zero);
    TANDEM_RETURN_IF_ERROR(check_offsets(op, cu_seqlens, dims.tokens));
    dims.longest = longest_sequence(cu_seqlens);
    const cpu::attention_scratch_plan plan = cpu::attention_forward_scratch<T>(dims);
    auto scratch = op_scratch::get(ctx, op, plan.bytes());
    if (!scratch) return scratch.error();
    cpu::attention_forward<T>(q.as<T>(), k.as<T>(), v.as<T>(), cu_seqlens.as<std::int32_t>(), dims, options.scaling,
                              options.sliding_window, out.as<T>(), lse.as<T>(), plan, scratch->data());
    return status::ok();
  }, TANDEM_ON_CUDA(cuda::attention_forward(ctx, storage, q, k, v, cu_seqlens, out, lse, options)));
}

status attention_backward(const exec_context& ctx, const tensor& q, const tensor& k, const tensor& v, const tensor& cu_seqlens,
                          const tensor& lse, const tensor& dout, const tensor& dq, const tensor& dk, const tensor& dv,
                          const attention_options& options, bool accumulate_dq, const tensor& out) {
  constexpr const char* op = "attention_backward";
  cpu::attention_dims dims{};
  TANDEM_RETURN_IF_ERROR(check_inputs(op, q, k, v, cu_seqlens, options, dims));
  TANDEM_RETURN_IF_ERROR(expect_shape(lse, op, "lse", {dims.tokens, dims.heads}));
  TANDEM_RETURN_IF_ERROR(expect_shape(dout, op, "dout", {dims.tokens, dims.heads, dims.head_dim}));
  TANDEM_RETURN_IF_ERROR(expect_shape(dq, op, "dq", {dims.tokens, dims.heads, dims.head_dim}));
  TANDEM_RETURN_IF_ERROR(expect_shape(dk, op, "dk", {dims.tokens, dims.kv_heads, dims.head_dim}));
  TANDEM_RETURN_IF_ERROR(expect_shape(dv, op, "dv", {dims.tokens, dims.kv_heads, dims.head_dim}));
  TANDEM_RETURN_IF_ERROR(expect_type(lse, op, "lse", statistics_type(q.type())));
  for (const auto& [t, name] : {named{&dout, "dout"}, named{&dq, "dq"}, named{&dk, "dk"}, named{&dv, "dv"}})
    TANDEM_RETURN_IF_ERROR(expect_type(*t, op, name, q.type()));
  for (const auto& [t, name] :
       {named{&lse, "lse"}, named{&dout, "dout"}, named{&dq, "dq"}, named{&dk, "dk"}, named{&dv, "dv"}})
    TANDEM_RETURN_IF_ERROR(expect_same_device(*t, q, op, name));
  if (!out.empty()) {  // optional: the forward's output (the CPU path recomputes D instead)
    TANDEM_RETURN_IF_ERROR(expect_shape(out, op, "out", {dims.tokens, dims.heads, dims.head_dim}));
    TANDEM_RETURN_IF_ERROR(expect_type(out, op, "out", q.type()));
    TANDEM_RETURN_IF_ERROR(expect_same_device(out, q, op, "out"));
  }
  return dispatch_float(ctx, op, q, [&](auto zero) {
    using T = decltype(zero);
    TANDEM_RETURN_IF_ERROR(check_offsets(op, cu_seqlens, dims.tokens));
    dims.longest = longest_sequence(cu_seqlens);
    const cpu::attention_scratch_plan plan = cpu::attention_backward_scratch<T>(dims);
    auto scratch = op_scratch::get(ctx, op, plan.bytes());
    if (!scratch) return scratch.error();
    cpu::attention_backward<T>(q.as<T>(), k.as<T>(), v.as<T>(), cu_seqlens.as<std::int32_t>(), dims, options.scaling,
                               options.sliding_window, lse.as<T>(), dout.as<T>(), dq.as<T>(), dk.as<T>(), dv.as<T>(),
                               accumulate_dq, plan, scratch->data());
    return status::ok();
  }, TANDEM_ON_CUDA(cuda::attention_backward(ctx, storage, q, k, v, cu_seqlens, lse, dout, dq, dk, dv, options,
                                             accumulate_dq, out)));
}

}  // namespace tandem::gpu::ops
