// CUDA side of RoPE (gpu/ops/rope.h): the upload of the host-computed inverse frequencies, the
// cos/sin tables and the NeoX half-split rotation, float32 or bfloat16 storage (`storage`) with
// float32 arithmetic. The caller has checked every argument.
//
// - rope_inv_freq: the float32 values are computed on the host exactly as on the CPU (powf of
//   glibc, docs/gemma4.md §5.11) and written into the device tensor by a kernel that takes them
//   by value as its argument (at most rope_max_half of them: head dims up to 1024): enqueued on
//   the context's stream, nothing waits, and the host values may go once the call returns.
// - rope_tables: angle = float32(pos) · inv_freq[j] in float32, then cosf/sinf with full range
//   reduction (angles reach ~2.6e5 rad; no __sinf/__cosf), rounded once to the tables' storage.
//   A negative position is not refused on CUDA (refusing it needs the positions on the host, a
//   synchronisation per call): its rows hold the rotation by the negative angle.
// - rope_forward / rope_backward: float32 products and sum per output element, rounded once to
//   the storage (bfloat16: one rounding, where HF's bf16 x·cos + rotate_half(x)·sin rounds three
//   times).
#pragma once

#include "gpu/core/dtype.h"
#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"
#include "gpu/core/tensor.h"

namespace tandem::gpu::ops::cuda {

/// The most inverse frequencies one rope_inv_freq call writes (a kernel argument of 2 KiB, well
/// inside the 4 KiB every CUDA version allows a kernel's arguments).
inline constexpr std::int64_t rope_max_half = 512;

/// inv_freq F32 [half] (device) = host_values [half], half <= rope_max_half (else unsupported);
/// enqueued (see above).
status rope_inv_freq(const exec_context& ctx, const float* host_values, const tensor& inv_freq);

/// cos, sin [n, 2·half] (storage) from positions I32 [n] and inv_freq F32 [half].
status rope_tables(const exec_context& ctx, dtype storage, const tensor& positions, const tensor& inv_freq,
                   const tensor& cos, const tensor& sin);

/// y = x rotated by +θ (forward) or dx = dy rotated by −θ (backward). in, out [tokens, heads, d]
/// (storage), d even; cos, sin [tokens, d] (storage); out may be in.
status rope_forward(const exec_context& ctx, dtype storage, const tensor& x, const tensor& cos, const tensor& sin,
                    const tensor& y);
status rope_backward(const exec_context& ctx, dtype storage, const tensor& dy, const tensor& cos, const tensor& sin,
                     const tensor& dx);

}  // namespace tandem::gpu::ops::cuda
