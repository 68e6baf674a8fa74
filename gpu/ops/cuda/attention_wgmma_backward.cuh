// The warpgroup products that the four wgmma passes of the bfloat16 attention
// backward share (nvcc only; private to attention.cu): the dK / dV and dQ passes at head dim 256
// (attention_wgmma_dkdv.cuh, attention_wgmma_dq.cuh) and their clustered forms at 512
// (attention_wgmma_dkdv_cluster.cuh, attention_wgmma_dq_cluster.cuh). Every operand tile lives in
// shared memory in the sw128 layout: blocks of 64 columns, each ROWS rows of 128 bytes.
//
//   issue_scores:      x (32 floats a thread) = A·Bᵀ over COLS columns, A and B of 64 rows each
//                      (SS, m64n64k16 x COLS / 16), issued only: the caller commits and waits, so
//                      a pass may issue two products before it waits for either;
//   scores:            the same product, fenced, issued and waited for;
//   accumulate_tiles:  acc += X·N, X the 64 x 64 accumulators of such a product rounded to bf16 as
//                      the A operand, N (64 rows) read N-major (RS, m64nNk16 x 4, N = 256 or 128
//                      for 128 or 64 accumulators a thread), waited for.
#pragma once

#include <cstdint>

#include "gpu/ops/cuda/attention_mma_common.cuh"
#include "gpu/ops/cuda/wgmma.cuh"

namespace tandem::gpu::ops::cuda::attn::mma {

/// Issues x = A·Bᵀ over COLS columns: A at a_addr (64 rows of A_ROWS per 64-column block), B at
/// b_addr (B_ROWS likewise); x[4c + e] is row 16·warp + lane / 4 (+ 8 when e & 2), column
/// 8c + 2·(lane % 4) + (e & 1) of the 64 x 64 product.
template <int COLS, int A_ROWS, int B_ROWS>
__device__ __forceinline__ void issue_scores(float (&x)[32], std::uint32_t a_addr, std::uint32_t b_addr) {
#pragma unroll
  for (int kk = 0; kk < COLS / 16; ++kk) {
    const int c0 = kk * 16;
    const std::uint64_t da = wgmma::sw128_desc(a_addr + (c0 >> 6) * A_ROWS * 128 + (c0 & 63) * 2, 16, 1024);
    const std::uint64_t db = wgmma::sw128_desc(b_addr + (c0 >> 6) * B_ROWS * 128 + (c0 & 63) * 2, 16, 1024);
    wgmma::mma_ss_m64n64k16(x, da, db, kk > 0);
  }
}

/// issue_scores with its fence before and its wait after: x holds the product on return.
template <int COLS, int A_ROWS, int B_ROWS>
__device__ __forceinline__ void scores(float (&x)[32], std::uint32_t a_addr, std::uint32_t b_addr) {
  wgmma::fence();
  issue_scores<COLS, A_ROWS, B_ROWS>(x, a_addr, b_addr);
  wgmma::commit();
  wgmma::wait<0>();
  wgmma::fence_registers(x);
}

/// acc += X·N: X the accumulators x of an issue_scores product (64 rows x K columns, K = 64),
/// rounded to bf16 as the A operand; N the K rows at n_addr (one 128-byte row each) of N columns
/// (256 for 128 accumulators a thread, 128 for 64), read N-major. Waits for the product.
template <int K, int ACC>
__device__ __forceinline__ void accumulate_tiles(float (&acc)[ACC], const float (&x)[32], std::uint32_t n_addr) {
  static_assert(ACC == 128 || ACC == 64, "m64n256 or m64n128 accumulators");
  std::uint32_t xa[K / 16][4];  // X as the A operand (C -> A: n-tiles 2kk, 2kk + 1)
  accumulators_as_a<K / 16>(x, xa);
  wgmma::fence();
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) {
    const std::uint64_t dn = wgmma::sw128_desc(n_addr + kk * 16 * 128, K * 128, 1024);
    if constexpr (ACC == 128)
      wgmma::mma_rs_m64n256k16_tn(acc, xa[kk], dn);
    else
      wgmma::mma_rs_m64n128k16_tn(acc, xa[kk], dn);
  }
  wgmma::commit();
  wgmma::wait<0>();
  wgmma::fence_registers(acc);
}

}  // namespace tandem::gpu::ops::cuda::attn::mma
