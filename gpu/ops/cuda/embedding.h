// CUDA kernels of the embedding lookup and its backward (gpu/ops/embedding.h), float32 or bfloat16
// storage (`storage`), float32 arithmetic; ids are int32 on the device. The caller has checked
// shapes, dtypes, devices, the column window and padding_id; both calls need a workspace.
//
// Ids outside [0, vocab): the header refuses them naming the first bad position and its value,
// which needs the ids' verdict on the host. So both calls end with a synchronisation on the
// context's stream (a device-side flag, the smallest bad position, copied back), and refuse with
// the CPU path's message. The kernels never read or write out of bounds for a bad id: the lookup
// writes zeros for its row (out is unspecified on failure), and the backward touches nothing of
// d_table when any id is bad (a refusal leaves it untouched, as on the CPU).
//
// Backward, deterministic without atomics: a stable radix sort (CUB) of (id, token) pairs into
// scratch groups the tokens of each id in token order; then each distinct id's row (one block per
// (run of equal ids, column tile)) starts from d_table's value and adds scale · dout[token] token
// by token in float32, in the CPU reference's order, and is stored once (bfloat16: one rounding
// per element, after its tokens' sum). The padding row's run is skipped.
#pragma once

#include <cstdint>

#include "gpu/core/dtype.h"
#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"
#include "gpu/core/tensor.h"

namespace tandem::gpu::ops::cuda {

/// out[t, j] = table[ids[t], column_begin + j] · float(scale). ids I32 [tokens]; table
/// [vocab, table_width] (storage); out [tokens, width] (storage). `host_checked`: the caller
/// checked the ids on the host (a mirror of them), so nothing waits for the device's check.
status embedding_forward(const exec_context& ctx, dtype storage, const tensor& ids, const tensor& table, double scale,
                         const tensor& out, std::int64_t column_begin, bool host_checked);

/// d_table[ids[t], column_begin + j] += float(scale) · dout[t, j] for tokens whose id is not
/// padding_id (-1: none). ids I32 [tokens]; dout [tokens, width] (storage); d_table
/// [vocab, table_width] (storage). At most 2^31 − 1 tokens.
status embedding_backward(const exec_context& ctx, dtype storage, const tensor& ids, const tensor& dout, double scale,
                          const tensor& d_table, std::int64_t padding_id, std::int64_t column_begin);

}  // namespace tandem::gpu::ops::cuda
