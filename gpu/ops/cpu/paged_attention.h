// CPU kernels of attention over a paged KV cache (see gpu/ops/paged_attention.h for the math).
// The caller has checked shapes, dtypes, the offsets and every block index a row touches; all
// tensors are contiguous and row-major.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gpu/ops/cpu/attention.h"

namespace tandem::gpu::ops::cpu {

/// Sizes of one paged call: n new rows of S sequences, H query heads, G kv heads, d head dim,
/// N blocks of B positions, M block-table columns.
struct paged_dims {
  std::int64_t rows, heads, kv_heads, head_dim, num_seqs;
  std::int64_t blocks, block_size, table_cols;
  std::int64_t widest;  ///< the most positions one row attends to (sizes the per-thread scratch)
};

template <class T>
void paged_kv_write(const T* k, const T* v, const std::int32_t* block_table, const std::int32_t* cu_rows,
                    const std::int32_t* positions, const paged_dims& dims, T* k_cache, T* v_cache);

/// Per thread: the visible keys' scores (T [widest]), then the output accumulator (double [d]).
template <class T>
attention_scratch_plan paged_attention_scratch(const paged_dims& dims);

template <class T>
void paged_attention_forward(const T* q, const T* k_cache, const T* v_cache, const std::int32_t* block_table,
                             const std::int32_t* cu_rows, const std::int32_t* positions, const paged_dims& dims,
                             double scaling, std::int64_t window, T* out, T* lse, const attention_scratch_plan& plan,
                             std::byte* scratch);

}  // namespace tandem::gpu::ops::cpu
