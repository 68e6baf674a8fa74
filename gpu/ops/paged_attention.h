// Attention of new query rows over a paged KV cache: decoding (one new row per sequence) and
// chunked prefill (several). The cache stores keys and values in blocks of B positions; a
// sequence's block table maps its logical block i (positions [i·B, (i+1)·B)) to a physical block.
//
//   paged_kv_write:          the new rows' K and V go into their slots (block_table[s][p / B], p % B)
//   paged_attention_forward: row r of sequence s at position p attends to positions
//                            max(0, p - W + 1)..p of s (W the sliding window, 0: none), read
//                            through the block table
//
// A row attending to the same key and value values gives exactly the bits attention_forward gives
// the row at that position of a packed batch (the CPU kernels share one row routine,
// cpu/attention_row.h): prefill-then-decode equals a full forward, whatever the chunking.
// Inference only: there is no backward.
//
// Shapes: n new rows, S sequences, H query heads, G kv heads (H a multiple of G), d head dim,
// N physical blocks of B positions, M block-table columns.
#pragma once

#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"
#include "gpu/core/tensor.h"
#include "gpu/ops/attention.h"

namespace tandem::gpu::ops {

/// Where the new rows go and what they see.
///   block_table  I32 [S, M]   physical block of each logical block; -1 for none (a block that
///                             fell out of a sliding window, or not yet allocated)
///   cu_rows      I32 [S + 1]  sequence s's new rows are [cu_rows[s], cu_rows[s + 1])
///   positions    I32 [n]      each new row's position in its sequence, >= 0
///   host         optional: the same three in host memory, holding the same values (a caller
///                that built them there and copied them to the device). The checks below then
///                run on the host over these, and CUDA skips its device check and the stream
///                synchronisation that reads its verdict: a decode step runs without waiting.
struct paged_rows {
  tensor block_table;
  tensor cu_rows;
  tensor positions;
  const paged_rows* host = nullptr;
};

/// k_cache, v_cache F32 [N, B, G, d] (F64 on the reference path): row r's k [n, G, d] and v go
/// into the slot of its position. A slot whose block is -1 or out of [0, N) is refused, naming
/// the sequence and position; on failure the caches are unspecified for the rows of this call.
status paged_kv_write(const exec_context& ctx, const tensor& k, const tensor& v, const paged_rows& rows,
                      const tensor& k_cache, const tensor& v_cache);

/// out [n, H, d] (q's dtype) and lse [n, H] (F32, or F64 with F64 q: statistics_type) of
/// q [n, H, d] over the cached keys and values. Every block a row's visible positions need must be
/// mapped (else invalid_argument naming the sequence, the position and its logical block); on
/// failure out and lse are unspecified. On CUDA without rows.host, both functions check the block
/// table on the device and read the verdict back: one stream synchronisation per call
/// (cuda/paged_attention.h); with it, the host checks and nothing waits.
/// options.scaling and options.sliding_window as attention_forward's.
status paged_attention_forward(const exec_context& ctx, const tensor& q, const tensor& k_cache, const tensor& v_cache,
                               const paged_rows& rows, const tensor& out, const tensor& lse,
                               const attention_options& options = {});

}  // namespace tandem::gpu::ops
