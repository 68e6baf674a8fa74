// Embedding lookup and scatter-add on the CPU.
#include "gpu/ops/cpu/embedding.h"

#include <algorithm>

#include "gpu/ops/cpu/parallel.h"

namespace tandem::gpu::ops::cpu {

template <class T>
void embedding_forward(const std::int32_t* ids, std::int64_t tokens, const T* table, std::int64_t table_width,
                       std::int64_t column_begin, std::int64_t width, T scale, T* out) {
#pragma omp parallel for schedule(static) if (parallel_worth(tokens * width))
  for (std::int64_t t = 0; t < tokens; ++t) {
    const T* row = table + static_cast<std::int64_t>(ids[t]) * table_width + column_begin;
    T* o = out + t * width;
    for (std::int64_t j = 0; j < width; ++j) o[j] = row[j] * scale;
  }
}

template <class T>
void embedding_backward(const std::int32_t* ids, std::int64_t tokens, const T* dout, std::int64_t width, T scale,
                        std::int64_t padding_id, T* d_table, std::int64_t table_width, std::int64_t column_begin) {
  // Repeated ids write the same row, so threads split the columns, not the tokens: every element
  // sums its contributions in token order, the same on any thread count.
  constexpr std::int64_t block = 256;
  const std::int64_t blocks = (width + block - 1) / block;
#pragma omp parallel for schedule(static) if (parallel_worth(tokens * width))
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::int64_t begin = b * block, end = std::min(width, begin + block);
    for (std::int64_t t = 0; t < tokens; ++t) {
      if (ids[t] == padding_id) continue;
      T* row = d_table + static_cast<std::int64_t>(ids[t]) * table_width + column_begin;
      const T* g = dout + t * width;
      for (std::int64_t j = begin; j < end; ++j) row[j] += scale * g[j];
    }
  }
}

template void embedding_forward<float>(const std::int32_t*, std::int64_t, const float*, std::int64_t, std::int64_t,
                                       std::int64_t, float, float*);
template void embedding_forward<double>(const std::int32_t*, std::int64_t, const double*, std::int64_t, std::int64_t,
                                        std::int64_t, double, double*);
template void embedding_backward<float>(const std::int32_t*, std::int64_t, const float*, std::int64_t, float,
                                        std::int64_t, float*, std::int64_t, std::int64_t);
template void embedding_backward<double>(const std::int32_t*, std::int64_t, const double*, std::int64_t, double,
                                         std::int64_t, double*, std::int64_t, std::int64_t);

}  // namespace tandem::gpu::ops::cpu
