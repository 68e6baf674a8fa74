// CUDA kernels of attention over a paged KV cache (gpu/ops/paged_attention.h), float32 or
// bfloat16 storage (`storage`), float32 arithmetic; lse is float32 either way. The caller has
// checked shapes, dtypes and devices; the work is enqueued on the context's stream.
//
// The rows' block table, offsets and positions are device data. To keep the public header's
// refusals (cu_rows not running from 0 to n or decreasing, a negative position, an unmapped or
// out-of-range block a row needs: the same invalid_argument messages as the CPU, the first fault
// in the CPU's order), both calls run a one-block check kernel beside their work, copy its
// verdict back and SYNCHRONISE THE CONTEXT'S STREAM before returning, unless the rows have a host
// mirror (paged_rows::host), which the caller has checked on the host: then they only enqueue. The work kernels never
// touch a slot of an invalid block (such keys read as zeros, such writes are dropped), so a
// refused call leaves the caches' other slots intact and out / lse unspecified.
//
// paged_attention_forward runs the packed forward's query-tile kernel (attention_query.cuh) with
// the keys read through the block table: a row gives exactly the bits attention_forward gives
// the row at that position over the same keys and values (same key tiles, same arithmetic).
// bfloat16 at head dim 256 or 512 (16-byte aligned tensors, as attention_forward's) runs the
// packed forward's tensor-core kernel instead, with the same guarantee (a row's numbers never
// depend on the other rows of its tile); a decode step there (no more rows per sequence than a
// decode block holds) runs the decode kernel of the same arithmetic in blocks of 8 rows
// (attention_decode.cuh), with the same guarantee again.
#pragma once

#include "gpu/core/dtype.h"
#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"
#include "gpu/core/tensor.h"
#include "gpu/ops/attention.h"
#include "gpu/ops/paged_attention.h"

namespace tandem::gpu::ops::cuda {

/// k, v [n, G, d] (storage) into k_cache, v_cache [N, B, G, d] (storage) at the rows' slots.
/// Needs a workspace; synchronises the stream (the check's verdict) unless rows.host.
status paged_kv_write(const exec_context& ctx, dtype storage, const tensor& k, const tensor& v, const paged_rows& rows,
                      const tensor& k_cache, const tensor& v_cache);

/// out [n, H, d] (storage) and lse F32 [n, H] of q [n, H, d] over the caches. Needs a workspace;
/// synchronises the stream (the check's verdict) unless rows.host.
status paged_attention_forward(const exec_context& ctx, dtype storage, const tensor& q, const tensor& k_cache,
                               const tensor& v_cache, const paged_rows& rows, const tensor& out, const tensor& lse,
                               const attention_options& options);

}  // namespace tandem::gpu::ops::cuda
