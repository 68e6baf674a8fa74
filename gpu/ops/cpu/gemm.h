// Row-major GEMM for the CPU backend (OpenBLAS): C = alpha * op(A) * op(B) + beta * C with
// op(X) = X or Xᵀ; A is [M, K] after op, B [K, N] after op, C [M, N]. Threads: OpenBLAS's pool.
//
// Row-invariant: when A is not transposed (every row of C comes from one row of A, as in a
// linear layer over tokens), OpenBLAS is always called on blocks of exactly gemm_row_block() rows,
// the last block zero-padded through scratch. OpenBLAS picks its kernel (gemv, small-matrix, or
// blocked) and blocking by M, so without this a row's bits depend on how many rows share the call;
// with it, a row gives the same bits alone or in any batch, which sampling, scoring and resume
// rely on. A transposed A (the weight gradient, a sum over rows) is called as is.
#pragma once

#include <cstdint>

namespace tandem::gpu::ops::cpu {

/// Rows per OpenBLAS call when A is not transposed, for element type T (float or double) and
/// B transposed or not: the largest of 16, 8, 4, 2, 1 for which this machine's OpenBLAS kernel
/// gives a row the same bits at every position of the block. Kernels differ: Skylake-X's give
/// any row of a 16-row block the same bits, while the Haswell and Zen kernels (AVX2) compute
/// alternate 6-row tiles with another summation order, so on those machines 16 would let a row's
/// bits depend on where a batch puts it. Probed once per process on shapes of a linear layer
/// (a few widths and depths, random data), before the first call.
template <class T>
std::int64_t gemm_row_block(bool transpose_b);

template <class T>
void gemm(bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a,
          std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc);

}  // namespace tandem::gpu::ops::cpu
