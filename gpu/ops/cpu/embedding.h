// CPU kernels of the embedding lookup (gpu/ops/embedding.h); the caller has checked every argument.
#pragma once

#include <cstdint>

namespace tandem::gpu::ops::cpu {

/// out [tokens, width] = table [vocab, table_width] rows ids, columns [column_begin, +width), · scale.
template <class T>
void embedding_forward(const std::int32_t* ids, std::int64_t tokens, const T* table, std::int64_t table_width,
                       std::int64_t column_begin, std::int64_t width, T scale, T* out);

/// d_table rows ids, columns [column_begin, +width) += scale · dout [tokens, width], skipping tokens
/// whose id equals padding_id (pass -1 for none).
template <class T>
void embedding_backward(const std::int32_t* ids, std::int64_t tokens, const T* dout, std::int64_t width, T scale,
                        std::int64_t padding_id, T* d_table, std::int64_t table_width, std::int64_t column_begin);

}  // namespace tandem::gpu::ops::cpu
