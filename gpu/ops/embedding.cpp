// Embedding lookup: checks (shapes, dtypes, devices, id range) and dispatch to the CPU and CUDA
// kernels (on CUDA the id range is checked on the device, gpu/ops/cuda/embedding.h).
#include "gpu/ops/embedding.h"

#include <string>
#include <string_view>

#include "gpu/ops/cpu/embedding.h"
#include "gpu/ops/cuda/embedding.h"
#include "gpu/ops/dispatch.h"
#include "gpu/ops/op_check.h"

namespace tandem::gpu::ops {
namespace {

// Every id in [0, vocab); otherwise names the first bad position and its value. Reads host memory.
status check_ids(const tensor& ids, std::int64_t vocab, std::string_view op) {
  const std::int32_t* p = ids.as<std::int32_t>();
  for (std::int64_t t = 0; t < ids.numel(); ++t)
    if (p[t] < 0 || p[t] >= vocab)
      return require(false, op,
                     "ids: position " + std::to_string(t) + " holds " + std::to_string(p[t]) + ", outside [0, " +
                         std::to_string(vocab) + ")");
  return status::ok();
}

// The column window [column_begin, column_begin + width) lies inside the table's columns.
status check_columns(std::int64_t column_begin, std::int64_t width, std::int64_t table_width, std::string_view op,
                     const std::string& name) {
  return require(column_begin >= 0 && column_begin + width <= table_width, op,
                 name + ": columns [" + std::to_string(column_begin) + ", " + std::to_string(column_begin + width) +
                     ") fall outside the table's " + std::to_string(table_width) + " columns");
}

}  // namespace

status embedding_forward(const exec_context& ctx, const tensor& ids, const tensor& table, double scale, const tensor& out,
                         std::int64_t column_begin, const tensor& host_ids) {
  constexpr const char* op = "embedding_forward";
  TANDEM_RETURN_IF_ERROR(expect_shape(ids, op, "ids", {any}));
  const std::int64_t tokens = ids.dim(0);
  TANDEM_RETURN_IF_ERROR(expect_shape(table, op, "table", {any, any}));
  const std::int64_t vocab = table.dim(0), table_width = table.dim(1);
  TANDEM_RETURN_IF_ERROR(expect_shape(out, op, "out", {tokens, any}));
  const std::int64_t width = out.dim(1);
  TANDEM_RETURN_IF_ERROR(expect_type(ids, op, "ids", dtype::int32));
  TANDEM_RETURN_IF_ERROR(expect_type(out, op, "out", table.type()));
  TANDEM_RETURN_IF_ERROR(expect_same_device(ids, table, op, "ids"));
  TANDEM_RETURN_IF_ERROR(expect_same_device(out, table, op, "out"));
  TANDEM_RETURN_IF_ERROR(check_columns(column_begin, width, table_width, op, "out"));
  const bool mirrored = !host_ids.empty();
  if (mirrored) {
    TANDEM_RETURN_IF_ERROR(expect_shape(host_ids, op, "host_ids", {tokens}));
    TANDEM_RETURN_IF_ERROR(expect_type(host_ids, op, "host_ids", dtype::int32));
    TANDEM_RETURN_IF_ERROR(require(host_ids.dev().is_cpu(), op, "host_ids is on " + host_ids.dev().to_string()));
    TANDEM_RETURN_IF_ERROR(check_ids(host_ids, vocab, op));
  }
  return dispatch_float(ctx, op, table, [&](auto zero) {
    using T = decltype(zero);
    if (!mirrored) TANDEM_RETURN_IF_ERROR(check_ids(ids, vocab, op));
    cpu::embedding_forward<T>(ids.as<std::int32_t>(), tokens, table.as<T>(), table_width, column_begin, width,
                              static_cast<T>(scale), out.as<T>());
    return status::ok();
  }, TANDEM_ON_CUDA(cuda::embedding_forward(ctx, storage, ids, table, scale, out, column_begin, mirrored)));
}

status embedding_backward(const exec_context& ctx, const tensor& ids, const tensor& dout, double scale, const tensor& d_table,
                          std::optional<std::int32_t> padding_id, std::int64_t column_begin) {
  constexpr const char* op = "embedding_backward";
  TANDEM_RETURN_IF_ERROR(expect_shape(ids, op, "ids", {any}));
  const std::int64_t tokens = ids.dim(0);
  TANDEM_RETURN_IF_ERROR(expect_shape(dout, op, "dout", {tokens, any}));
  const std::int64_t width = dout.dim(1);
  TANDEM_RETURN_IF_ERROR(expect_shape(d_table, op, "d_table", {any, any}));
  const std::int64_t vocab = d_table.dim(0), table_width = d_table.dim(1);
  TANDEM_RETURN_IF_ERROR(expect_type(ids, op, "ids", dtype::int32));
  TANDEM_RETURN_IF_ERROR(expect_type(dout, op, "dout", d_table.type()));
  TANDEM_RETURN_IF_ERROR(expect_same_device(ids, d_table, op, "ids"));
  TANDEM_RETURN_IF_ERROR(expect_same_device(dout, d_table, op, "dout"));
  TANDEM_RETURN_IF_ERROR(check_columns(column_begin, width, table_width, op, "dout"));
  if (padding_id)
    TANDEM_RETURN_IF_ERROR(require(*padding_id >= 0 && *padding_id < vocab, op,
                                   "padding_id " + std::to_string(*padding_id) + " is outside [0, " +
                                       std::to_string(vocab) + ")"));
  return dispatch_float(ctx, op, d_table, [&](auto zero) {
    using T = decltype(zero);
    TANDEM_RETURN_IF_ERROR(check_ids(ids, vocab, op));
    cpu::embedding_backward<T>(ids.as<std::int32_t>(), tokens, dout.as<T>(), width, static_cast<T>(scale),
                               padding_id ? *padding_id : -1, d_table.as<T>(), table_width, column_begin);
    return status::ok();
  }, TANDEM_ON_CUDA(cuda::embedding_backward(ctx, storage, ids, dout, scale, d_table, padding_id ? *padding_id : -1,
                                              column_begin)));
}

}  // namespace tandem::gpu::ops
