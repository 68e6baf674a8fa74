// Row-major GEMM for the CPU backend (OpenBLAS): C = alpha * op(A) * op(B) + beta * C with
// op(X) = X or Xᵀ; A is [M, K] after op, B [K, N] after op, C [M, N]. Threads: OpenBLAS's pool.
#pragma once

#include <cstdint>

namespace tandem::gpu::ops::cpu {

template <class T>
void gemm(bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a,
          std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc);

}  // namespace tandem::gpu::ops::cpu
