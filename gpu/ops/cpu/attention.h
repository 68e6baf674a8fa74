// CPU reference kernels of packed causal attention (see gpu/ops/attention.h for the math). The
// caller has checked shapes, dtypes and the offsets; all tensors are contiguous and row-major.
#pragma once

#include <cstdint>

namespace tandem::gpu::ops::cpu {

/// Sizes of one attention call: T tokens, H query heads, G kv heads (H a multiple of G), d head_dim.
struct attention_dims {
  std::int64_t tokens;
  std::int64_t heads;
  std::int64_t kv_heads;
  std::int64_t head_dim;
  std::int64_t num_seqs;  ///< S; cu_seqlens holds S + 1 offsets
};

/// out [T, H, d] and lse [T, H] from q [T, H, d], k, v [T, G, d]; window 0 = full causal.
template <class T>
void attention_forward(const T* q, const T* k, const T* v, const std::int32_t* cu_seqlens, const attention_dims& dims,
                       double scaling, std::int64_t window, T* out, T* lse);

/// dq [T, H, d] (= or += per accumulate_dq), dk, dv [T, G, d] (+=) from dout and the forward's lse.
template <class T>
void attention_backward(const T* q, const T* k, const T* v, const std::int32_t* cu_seqlens, const attention_dims& dims,
                        double scaling, std::int64_t window, const T* lse, const T* dout, T* dq, T* dk, T* dv,
                        bool accumulate_dq);

}  // namespace tandem::gpu::ops::cpu
