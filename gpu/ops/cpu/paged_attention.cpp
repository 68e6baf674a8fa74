// CPU kernels of paged attention: OpenMP over (new row, head) pairs, each row through the same
// routine as the packed kernel (attention_row.h), its keys read through the block table.
#include "gpu/ops/cpu/paged_attention.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "gpu/ops/cpu/attention_row.h"
#include "gpu/ops/cpu/parallel.h"

namespace tandem::gpu::ops::cpu {
namespace {

std::size_t aligned(std::size_t bytes) { return (bytes + 63) / 64 * 64; }

/// The sequence of each new row.
std::vector<std::int64_t> sequence_of_rows(const std::int32_t* cu_rows, const paged_dims& dims) {
  std::vector<std::int64_t> seq(static_cast<std::size_t>(dims.rows));
  for (std::int64_t s = 0; s < dims.num_seqs; ++s)
    for (std::int64_t r = cu_rows[s]; r < cu_rows[s + 1]; ++r) seq[static_cast<std::size_t>(r)] = s;
  return seq;
}

/// Element offset of (position p of sequence s, kv head g) in a cache.
std::int64_t slot(const std::int32_t* block_table, const paged_dims& dims, std::int64_t s, std::int64_t p, std::int64_t g) {
  const std::int64_t block = block_table[s * dims.table_cols + p / dims.block_size];
  return ((block * dims.block_size + p % dims.block_size) * dims.kv_heads + g) * dims.head_dim;
}

}  // namespace

template <class T>
void paged_kv_write(const T* k, const T* v, const std::int32_t* block_table, const std::int32_t* cu_rows,
                    const std::int32_t* positions, const paged_dims& dims, T* k_cache, T* v_cache) {
  const std::vector<std::int64_t> seq = sequence_of_rows(cu_rows, dims);
  const std::int64_t g_count = dims.kv_heads, d = dims.head_dim;
#pragma omp parallel for schedule(static) if (parallel_worth(dims.rows * g_count * d))
  for (std::int64_t r = 0; r < dims.rows; ++r) {
    const std::int64_t s = seq[static_cast<std::size_t>(r)], p = positions[r];
    for (std::int64_t g = 0; g < g_count; ++g) {
      const std::int64_t at = slot(block_table, dims, s, p, g);
      std::memcpy(k_cache + at, k + (r * g_count + g) * d, static_cast<std::size_t>(d) * sizeof(T));
      std::memcpy(v_cache + at, v + (r * g_count + g) * d, static_cast<std::size_t>(d) * sizeof(T));
    }
  }
}

template <class T>
attention_scratch_plan paged_attention_scratch(const paged_dims& dims) {
  const auto keys = static_cast<std::size_t>(std::max<std::int64_t>(dims.widest, 1));
  return {omp_get_max_threads(), aligned(keys * sizeof(T)) + aligned(static_cast<std::size_t>(dims.head_dim) * sizeof(double))};
}

template <class T>
void paged_attention_forward(const T* q, const T* k_cache, const T* v_cache, const std::int32_t* block_table,
                             const std::int32_t* cu_rows, const std::int32_t* positions, const paged_dims& dims,
                             double scaling, std::int64_t window, T* out, T* lse, const attention_scratch_plan& plan,
                             std::byte* scratch) {
  const std::vector<std::int64_t> seq = sequence_of_rows(cu_rows, dims);
  const std::int64_t heads = dims.heads, d = dims.head_dim, group = heads / dims.kv_heads;
  const std::int64_t pairs = dims.rows * heads;
  const std::size_t scores_bytes = aligned(static_cast<std::size_t>(std::max<std::int64_t>(dims.widest, 1)) * sizeof(T));
#pragma omp parallel num_threads(plan.threads) if (parallel_worth(pairs * std::max<std::int64_t>(dims.widest, 1) * d))
  {
    std::byte* mine = scratch + static_cast<std::size_t>(omp_get_thread_num()) * plan.stride;
    T* const e = reinterpret_cast<T*>(mine);
    double* const acc = reinterpret_cast<double*>(mine + scores_bytes);
#pragma omp for schedule(dynamic, 16)
    for (std::int64_t pair = 0; pair < pairs; ++pair) {
      const std::int64_t r = pair / heads, g = pair % heads / group;
      const std::int64_t s = seq[static_cast<std::size_t>(r)], p = positions[r];
      const std::int64_t first = window > 0 ? std::max<std::int64_t>(0, p - window + 1) : 0;
      attend_row(q + pair * d, first, p, [&](std::int64_t j) { return k_cache + slot(block_table, dims, s, j, g); },
                 [&](std::int64_t j) { return v_cache + slot(block_table, dims, s, j, g); }, d, scaling, e, acc,
                 out + pair * d, lse + pair);
    }
  }
}

#define TANDEM_PAGED_INSTANTIATE(T)                                                                                  \
  template void paged_kv_write<T>(const T*, const T*, const std::int32_t*, const std::int32_t*, const std::int32_t*, \
                                  const paged_dims&, T*, T*);                                                        \
  template attention_scratch_plan paged_attention_scratch<T>(const paged_dims&);                                     \
  template void paged_attention_forward<T>(const T*, const T*, const T*, const std::int32_t*, const std::int32_t*,   \
                                           const std::int32_t*, const paged_dims&, double, std::int64_t, T*, T*,     \
                                           const attention_scratch_plan&, std::byte*);
TANDEM_PAGED_INSTANTIATE(float)
TANDEM_PAGED_INSTANTIATE(double)
#undef TANDEM_PAGED_INSTANTIATE

}  // namespace tandem::gpu::ops::cpu
