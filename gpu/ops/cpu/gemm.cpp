// GEMM through CBLAS, in fixed row blocks when A is not transposed (gemm.h).
#include "gpu/ops/cpu/gemm.h"

#include <algorithm>
#include <cblas.h>
#include <cstring>
#include <vector>

namespace tandem::gpu::ops::cpu {
namespace {

void blas(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a, std::int64_t lda,
          const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta, c,
              static_cast<int>(ldc));
}

void blas(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, double alpha, const double* a,
          std::int64_t lda, const double* b, std::int64_t ldb, double beta, double* c, std::int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta, c,
              static_cast<int>(ldc));
}

}  // namespace

template <class T>
void gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a, std::int64_t lda,
          const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (ta) {
    blas(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  constexpr std::int64_t rows = gemm_row_block;
  const std::int64_t full = m / rows * rows;
  for (std::int64_t r = 0; r < full; r += rows) blas(false, tb, rows, n, k, alpha, a + r * lda, lda, b, ldb, beta, c + r * ldc, ldc);
  if (full == m) return;
  // The last rows, padded to a whole block with zeros.
  const std::int64_t left = m - full;
  thread_local std::vector<T> pa, pc;
  pa.assign(static_cast<std::size_t>(rows * k), T(0));
  pc.assign(static_cast<std::size_t>(rows * n), T(0));
  for (std::int64_t r = 0; r < left; ++r) {
    std::memcpy(pa.data() + r * k, a + (full + r) * lda, static_cast<std::size_t>(k) * sizeof(T));
    if (beta != T(0)) std::memcpy(pc.data() + r * n, c + (full + r) * ldc, static_cast<std::size_t>(n) * sizeof(T));
  }
  blas(false, tb, rows, n, k, alpha, pa.data(), k, b, ldb, beta, pc.data(), n);
  for (std::int64_t r = 0; r < left; ++r)
    std::memcpy(c + (full + r) * ldc, pc.data() + r * n, static_cast<std::size_t>(n) * sizeof(T));
}

template void gemm<float>(bool, bool, std::int64_t, std::int64_t, std::int64_t, float, const float*, std::int64_t,
                          const float*, std::int64_t, float, float*, std::int64_t);
template void gemm<double>(bool, bool, std::int64_t, std::int64_t, std::int64_t, double, const double*, std::int64_t,
                           const double*, std::int64_t, double, double*, std::int64_t);

}  // namespace tandem::gpu::ops::cpu
