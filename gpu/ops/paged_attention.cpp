// Paged attention: argument checks (shapes, dtypes, devices, offsets, every block a row touches)
// and dispatch to the CPU kernels or the CUDA kernels (which check the device-side offsets,
// positions and blocks on the device unless the rows come with a host mirror checked here: see
// gpu/ops/cuda/paged_attention.h).
#include "gpu/ops/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "gpu/ops/cpu/paged_attention.h"
#include "gpu/ops/cuda/paged_attention.h"
#include "gpu/ops/dispatch.h"
#include "gpu/ops/op_check.h"
#include "gpu/ops/scratch.h"

namespace tandem::gpu::ops {
namespace {

using named = std::pair<const tensor*, const char*>;

/// The caches' and the rows' shapes, dtypes and devices; fills dims (all but widest).
status check_layout(const char* op, const tensor& rows_kv, const tensor& k_cache, const tensor& v_cache,
                    const paged_rows& r, cpu::paged_dims& dims) {
  TANDEM_RETURN_IF_ERROR(expect_shape(k_cache, op, "k_cache", {any, any, any, any}));
  TANDEM_RETURN_IF_ERROR(expect_shape(v_cache, op, "v_cache", {k_cache.dim(0), k_cache.dim(1), k_cache.dim(2), k_cache.dim(3)}));
  TANDEM_RETURN_IF_ERROR(require(k_cache.dim(1) > 0 && k_cache.dim(2) > 0, op, "the caches need blocks of > 0 positions and > 0 kv heads"));
  TANDEM_RETURN_IF_ERROR(expect_shape(r.block_table, op, "block_table", {any, any}));
  TANDEM_RETURN_IF_ERROR(expect_shape(r.cu_rows, op, "cu_rows", {r.block_table.dim(0) + 1}));
  TANDEM_RETURN_IF_ERROR(expect_shape(r.positions, op, "positions", {rows_kv.dim(0)}));
  for (const auto& [t, name] : {named{&r.block_table, "block_table"}, named{&r.cu_rows, "cu_rows"}, named{&r.positions, "positions"}})
    TANDEM_RETURN_IF_ERROR(expect_type(*t, op, name, dtype::int32));
  TANDEM_RETURN_IF_ERROR(expect_type(k_cache, op, "k_cache", rows_kv.type()));
  TANDEM_RETURN_IF_ERROR(expect_type(v_cache, op, "v_cache", rows_kv.type()));
  for (const auto& [t, name] : {named{&k_cache, "k_cache"}, named{&v_cache, "v_cache"}, named{&r.block_table, "block_table"},
                                named{&r.cu_rows, "cu_rows"}, named{&r.positions, "positions"}})
    TANDEM_RETURN_IF_ERROR(expect_same_device(*t, rows_kv, op, name));
  dims = {rows_kv.dim(0), 0, k_cache.dim(2), k_cache.dim(3), r.block_table.dim(0), k_cache.dim(0), k_cache.dim(1),
          r.block_table.dim(1), 0};
  if (const paged_rows* h = r.host) {
    TANDEM_RETURN_IF_ERROR(expect_shape(h->block_table, op, "host block_table", {r.block_table.dim(0), r.block_table.dim(1)}));
    TANDEM_RETURN_IF_ERROR(expect_shape(h->cu_rows, op, "host cu_rows", {r.cu_rows.dim(0)}));
    TANDEM_RETURN_IF_ERROR(expect_shape(h->positions, op, "host positions", {r.positions.dim(0)}));
    for (const auto& [mirror, name] : {named{&h->block_table, "host block_table"}, named{&h->cu_rows, "host cu_rows"},
                                       named{&h->positions, "host positions"}}) {
      TANDEM_RETURN_IF_ERROR(expect_type(*mirror, op, name, dtype::int32));
      TANDEM_RETURN_IF_ERROR(require(mirror->dev().is_cpu(), op, std::string(name) + " is on " + mirror->dev().to_string()));
    }
    TANDEM_RETURN_IF_ERROR(require(h->host == nullptr, op, "the host rows have a host mirror of their own"));
  }
  return status::ok();
}

/// On the host (the rows' host mirror where they have one, else the rows, which dispatch put on
/// the CPU): the offsets tile the rows, positions are >= 0, and positions first..last of every
/// row are mapped to blocks in [0, N) (first = last for a write). Fills dims.widest.
status check_blocks(const char* op, const paged_rows& rows, std::int64_t window, bool whole_window, cpu::paged_dims& dims) {
  const paged_rows& r = rows.host ? *rows.host : rows;
  const std::int32_t* cu = r.cu_rows.as<std::int32_t>();
  const std::int32_t* pos = r.positions.as<std::int32_t>();
  const std::int32_t* table = r.block_table.as<std::int32_t>();
  if (cu[0] != 0 || cu[dims.num_seqs] != dims.rows)
    return require(false, op, "cu_rows must run from 0 to the " + std::to_string(dims.rows) + " rows");
  dims.widest = 0;
  for (std::int64_t s = 0; s < dims.num_seqs; ++s) {
    if (cu[s + 1] < cu[s]) return require(false, op, "cu_rows decreases at sequence " + std::to_string(s));
    for (std::int64_t row = cu[s]; row < cu[s + 1]; ++row) {
      const std::int64_t p = pos[row];
      if (p < 0) return require(false, op, "row " + std::to_string(row) + " has position " + std::to_string(p));
      const std::int64_t first = !whole_window ? p : window > 0 ? std::max<std::int64_t>(0, p - window + 1) : 0;
      dims.widest = std::max(dims.widest, p - first + 1);
      for (std::int64_t b = first / dims.block_size; b <= p / dims.block_size; ++b) {
        const std::int64_t block = b < dims.table_cols ? table[s * dims.table_cols + b] : -1;
        if (block < 0 || block >= dims.blocks)
          return require(false, op, "sequence " + std::to_string(s) + ", position " + std::to_string(p) +
                                        ": logical block " + std::to_string(b) +
                                        (block < 0 ? " is not mapped" : " maps to block " + std::to_string(block) +
                                                                            ", outside the " + std::to_string(dims.blocks) +
                                                                            " blocks of the cache"));
      }
    }
  }
  return status::ok();
}

}  // namespace

status paged_kv_write(const exec_context& ctx, const tensor& k, const tensor& v, const paged_rows& rows,
                      const tensor& k_cache, const tensor& v_cache) {
  constexpr const char* op = "paged_kv_write";
  cpu::paged_dims dims{};
  TANDEM_RETURN_IF_ERROR(check_layout(op, k, k_cache, v_cache, rows, dims));
  TANDEM_RETURN_IF_ERROR(expect_shape(k, op, "k", {any, dims.kv_heads, dims.head_dim}));
  TANDEM_RETURN_IF_ERROR(expect_shape(v, op, "v", {k.dim(0), dims.kv_heads, dims.head_dim}));
  TANDEM_RETURN_IF_ERROR(expect_type(v, op, "v", k.type()));
  TANDEM_RETURN_IF_ERROR(expect_same_device(v, k, op, "v"));
  if (rows.host) TANDEM_RETURN_IF_ERROR(check_blocks(op, rows, 0, false, dims));
  return dispatch_float(ctx, op, k, [&](auto zero) {
    using T = decltype(zero);
    if (!rows.host) TANDEM_RETURN_IF_ERROR(check_blocks(op, rows, 0, false, dims));
    cpu::paged_kv_write<T>(k.as<T>(), v.as<T>(), rows.block_table.as<std::int32_t>(), rows.cu_rows.as<std::int32_t>(),
                           rows.positions.as<std::int32_t>(), dims, k_cache.as<T>(), v_cache.as<T>());
    return status::ok();
  }, TANDEM_ON_CUDA(cuda::paged_kv_write(ctx, storage, k, v, rows, k_cache, v_cache)));
}

status paged_attention_forward(const exec_context& ctx, const tensor& q, const tensor& k_cache, const tensor& v_cache,
                               const paged_rows& rows, const tensor& out, const tensor& lse,
                               const attention_options& options) {
  constexpr const char* op = "paged_attention_forward";
  cpu::paged_dims dims{};
  TANDEM_RETURN_IF_ERROR(expect_shape(q, op, "q", {any, any, any}));
  TANDEM_RETURN_IF_ERROR(check_layout(op, q, k_cache, v_cache, rows, dims));
  dims.heads = q.dim(1);
  TANDEM_RETURN_IF_ERROR(expect_shape(q, op, "q", {dims.rows, any, dims.head_dim}));
  TANDEM_RETURN_IF_ERROR(require(dims.heads % dims.kv_heads == 0, op,
                                 "q has " + std::to_string(dims.heads) + " heads, not a multiple of the " +
                                     std::to_string(dims.kv_heads) + " kv heads of the cache"));
  TANDEM_RETURN_IF_ERROR(expect_shape(out, op, "out", {dims.rows, dims.heads, dims.head_dim}));
  TANDEM_RETURN_IF_ERROR(expect_shape(lse, op, "lse", {dims.rows, dims.heads}));
  TANDEM_RETURN_IF_ERROR(expect_type(out, op, "out", q.type()));
  TANDEM_RETURN_IF_ERROR(expect_type(lse, op, "lse", statistics_type(q.type())));
  TANDEM_RETURN_IF_ERROR(expect_same_device(out, q, op, "out"));
  TANDEM_RETURN_IF_ERROR(expect_same_device(lse, q, op, "lse"));
  TANDEM_RETURN_IF_ERROR(require(std::isfinite(options.scaling), op, "scaling must be finite"));
  TANDEM_RETURN_IF_ERROR(require(options.sliding_window >= 0, op,
                                 "sliding_window must be >= 0, got " + std::to_string(options.sliding_window)));
  if (rows.host) TANDEM_RETURN_IF_ERROR(check_blocks(op, rows, options.sliding_window, true, dims));
  return dispatch_float(ctx, op, q, [&](auto zero) {
    using T = decltype(zero);
    if (!rows.host) TANDEM_RETURN_IF_ERROR(check_blocks(op, rows, options.sliding_window, true, dims));
    const cpu::attention_scratch_plan plan = cpu::paged_attention_scratch<T>(dims);
    auto scratch = op_scratch::get(ctx, op, plan.bytes());
    if (!scratch) return scratch.error();
    cpu::paged_attention_forward<T>(q.as<T>(), k_cache.as<T>(), v_cache.as<T>(), rows.block_table.as<std::int32_t>(),
                                    rows.cu_rows.as<std::int32_t>(), rows.positions.as<std::int32_t>(), dims,
                                    options.scaling, options.sliding_window, out.as<T>(), lse.as<T>(), plan,
                                    scratch->data());
    return status::ok();
  }, TANDEM_ON_CUDA(cuda::paged_attention_forward(ctx, storage, q, k_cache, v_cache, rows, out, lse, options)));
}

}  // namespace tandem::gpu::ops
