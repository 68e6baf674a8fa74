// GEMM through CBLAS, in fixed row blocks when A is not transposed (gemm.h).
#include "gpu/ops/cpu/gemm.h"

#include <algorithm>
#include <cblas.h>
#include <cstring>
#include <utility>
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

/// True when every position of a `rows`-row block gives a probe row the same bits, for a few
/// shapes of B; the other rows of the block are random.
template <class T>
bool row_invariant(std::int64_t rows, bool tb) {
  std::uint64_t state = 0x243F6A8885A308D3ull;
  auto next = [&state] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<T>(static_cast<double>(state >> 40) / 16777216.0 - 0.5);
  };
  for (const auto& [n, k] : {std::pair<std::int64_t, std::int64_t>{20, 64}, {64, 64}, {96, 300}, {256, 48}, {7, 1024}}) {
    std::vector<T> b(static_cast<std::size_t>(n * k)), x(static_cast<std::size_t>(k)), a(static_cast<std::size_t>(rows * k));
    std::vector<T> c(static_cast<std::size_t>(rows * n)), first(static_cast<std::size_t>(n));
    for (auto& v : b) v = next();
    for (auto& v : x) v = next();
    for (std::int64_t p = 0; p < rows; ++p) {
      for (auto& v : a) v = next();
      std::copy(x.begin(), x.end(), a.begin() + p * k);
      blas(false, tb, rows, n, k, T(1), a.data(), k, b.data(), tb ? k : n, T(0), c.data(), n);
      if (p == 0) std::copy(c.begin(), c.begin() + n, first.begin());
      else if (std::memcmp(first.data(), c.data() + p * n, static_cast<std::size_t>(n) * sizeof(T)) != 0) return false;
    }
  }
  return true;
}

template <class T>
std::int64_t probe_row_block(bool tb) {
  for (const std::int64_t rows : {16, 8, 4, 2})
    if (row_invariant<T>(rows, tb)) return rows;
  return 1;  // one row per call: nothing shares it
}

}  // namespace

template <class T>
std::int64_t gemm_row_block(bool transpose_b) {
  static const std::int64_t plain = probe_row_block<T>(false), transposed = probe_row_block<T>(true);
  return transpose_b ? transposed : plain;
}

template std::int64_t gemm_row_block<float>(bool);
template std::int64_t gemm_row_block<double>(bool);

template <class T>
void gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a, std::int64_t lda,
          const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (ta) {
    blas(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  const std::int64_t rows = gemm_row_block<T>(tb);
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
