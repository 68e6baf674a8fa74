// CPU reference kernels of packed causal attention (see gpu/ops/attention.h for the math). The
// caller has checked shapes, dtypes and the offsets; all tensors are contiguous and row-major.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tandem::gpu::ops::cpu {

/// Sizes of one attention call: T tokens, H query heads, G kv heads (H a multiple of G), d head_dim.
struct attention_dims {
  std::int64_t tokens;
  std::int64_t heads;
  std::int64_t kv_heads;
  std::int64_t head_dim;
  std::int64_t num_seqs;  ///< S; cu_seqlens holds S + 1 offsets
  std::int64_t longest;   ///< the longest sequence's length (sizes the per-thread scratch)
};

/// Scratch the kernels need: `threads` slices of the returned stride each, 64-byte aligned; the
/// OpenMP team of a call never exceeds `threads`.
struct attention_scratch_plan {
  int threads;
  std::size_t stride;  ///< bytes per thread
  std::size_t bytes() const { return static_cast<std::size_t>(threads) * stride; }
};
template <class T>
attention_scratch_plan attention_forward_scratch(const attention_dims& dims);
template <class T>
attention_scratch_plan attention_backward_scratch(const attention_dims& dims);

/// out [T, H, d] and lse [T, H] from q [T, H, d], k, v [T, G, d]; window 0 = full causal.
template <class T>
void attention_forward(const T* q, const T* k, const T* v, const std::int32_t* cu_seqlens, const attention_dims& dims,
                       double scaling, std::int64_t window, T* out, T* lse, const attention_scratch_plan& plan,
                       std::byte* scratch);

/// dq [T, H, d] (= or += per accumulate_dq), dk, dv [T, G, d] (+=) from dout and the forward's lse.
template <class T>
void attention_backward(const T* q, const T* k, const T* v, const std::int32_t* cu_seqlens, const attention_dims& dims,
                        double scaling, std::int64_t window, const T* lse, const T* dout, T* dq, T* dk, T* dv,
                        bool accumulate_dq, const attention_scratch_plan& plan, std::byte* scratch);

}  // namespace tandem::gpu::ops::cpu
