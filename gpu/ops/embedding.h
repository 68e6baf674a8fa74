// Embedding lookup with a scale (Gemma 4's embed_tokens · bf16(√H) and the per-layer table · √P),
// and its backward, a scatter-add into the table gradient that skips the padding row.
#pragma once

#include <cstdint>
#include <optional>

#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"
#include "gpu/core/tensor.h"

namespace tandem::gpu::ops {

/// out[t, j] = table[ids[t], column_begin + j] · scale for j < width, width = out.dim(1).
///   ids    I32 [tokens], each in [0, vocab)
///   table  F32 [vocab, table_width]; the per-layer table [V_ple, L·P] is looked up whole with
///          out [tokens, L·P], or one layer's slice with out [tokens, P] and column_begin l·P
///   scale  the embedding scale, already rounded as the model wants it (e.g. bf16(√H))
///   out    F32 [tokens, width], column_begin + width <= table_width
///   host_ids  optional: the ids' values in host memory (a caller that built them there and
///          copied them to the device): the ids are checked on the host over these, and CUDA
///          skips its device check and the stream synchronisation that reads its verdict
/// The padding row is looked up like any other (padding only affects gradients). An id outside
/// [0, vocab) is refused naming its position and value. On failure out is unspecified; the
/// inputs are untouched.
status embedding_forward(const exec_context& ctx, const tensor& ids, const tensor& table, double scale, const tensor& out,
                         std::int64_t column_begin = 0, const tensor& host_ids = {});

/// d_table[ids[t], column_begin + j] += scale · dout[t, j] for every token whose id is not
/// `padding_id` (HF's padding_idx: that row gets no gradient from the lookup). Accumulates, so
/// micro-batches and several lookups of one table sum; repeated ids add in token order.
///   ids      I32 [tokens], each in [0, vocab)
///   dout     F32 [tokens, width]
///   d_table  F32 [vocab, table_width], column_begin + width <= table_width
///   padding_id  none, or an id in [0, vocab)
/// On failure d_table is unspecified (a refusal by the checks leaves it untouched).
status embedding_backward(const exec_context& ctx, const tensor& ids, const tensor& dout, double scale, const tensor& d_table,
                          std::optional<std::int32_t> padding_id = std::nullopt, std::int64_t column_begin = 0);

}  // namespace tandem::gpu::ops
