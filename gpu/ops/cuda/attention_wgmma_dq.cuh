// The dQ pass of the bfloat16 attention backward at head dim 256 on Hopper's warpgroup tensor cores
// (wgmma, sm_90a; nvcc only; private to attention.cu). The block structure is the forward's
// (attention_wgmma_forward.cuh, d 256): a block owns the 128 query rows of one tile of the
// forward's layout (the GQA heads of one kv head times consecutive positions, attn::query_layout),
// two consumer warpgroups own 64 rows each, and key tiles of 64 positions stream through shared
// memory, copied by the bulk tensor copy engine (tma_keys). Q and dO of the 128 rows stay in shared
// memory. With the queries as the rows of every product (M = 64 rows of a warpgroup):
//
//   dP  = dO·Vᵀ   (SS, m64n64k16 x 16)       P  = exp2(scaling·log2(e)·S - log2(e)·lse)
//   S   = Q·Kᵀ    (SS, m64n64k16 x 16)       dS = P ⊙ (dP - D)
//   dQ += dS·K    (RS, m64n256k16 x 4, K read N-major, as the forward reads V)
//   dq  = scaling · dQ (+ the old dq when accumulating), rounded to bf16 once
//
// dS is rounded to bf16 only as the A operand of dS·K (the C -> A mapping of the forward's P); P,
// S, dP and the accumulators are f32. A row's dQ sums its key tiles in position order, the tensor
// core's order inside a tile: deterministic, no atomics. A key tile every row of the block sees whole
// skips the mask (the same bits). Keys and values must be finite: the rows of a tile outside a
// row's range (neighbouring sequences, past the batch: zeros) meet a zero dS.
//
// Roles and pipeline of one block (three warpgroups; the consumers own the rows, the producer only
// copies, with few registers, so a consumer can hold 128 dQ accumulators, 32 of S and 32 of dP):
//
//   producer (warpgroup 2):  cp.async dO, cp.async Q; [thread 0: K_0, V_0, K_1 (no waits)];
//                            wait dO -> do_full; wait Q -> q_full;
//                            thread 0, copies in the order K_0, V_0, K_1, V_1, K_2, V_2, ...:
//                            K_i (stage s = i % 2, round r = i / 2): [i >= 2: wait k_empty[s] of
//                            round r - 1] -> k_full[s];  V_i: [i >= 1: wait v_empty of tile i - 1]
//                            -> v_full;  then wait until the last tiles are released
//   consumer (warpgroups 0, 1), tile i:
//                            wait v_full (tile i); dP = dO·Vᵀ (wgmma, commit);
//                            wait k_full[s] (round r); S = Q·Kᵀ (wgmma, commit);
//                            wait for dP; release v_empty; wait for S;
//                            mask, P, dS -> bf16 A fragments;
//                            dQ += dS·K (wgmma, wait); release k_empty[s]
//
// K is double-buffered, V single-buffered: V is free once dP is computed (the first product of a
// tile), K only after dS·K (the last), so V_{i+1} lands while the consumers compute S_i, dS_i and
// dS_i·K_i. A full barrier of K or V completes when the tile's bytes have landed (rows past the
// batch read as zeros), an empty barrier when the 8 consumer warps have released it; do_full and
// q_full when each of the producer's 128 threads has its copies landed. The consumers never wait
// on each other, so one warpgroup's dS runs while the other's products occupy the tensor cores.
// Every wait traps after 10 seconds (wgmma::mbarrier_wait).
//
// Shared memory (dynamic, 1024-byte aligned), dq_wg_shape::smem_bytes = 232000 bytes:
//   qs      bf16 sw128 [128 rows][256]          65536   Q of the block's rows (zeros: no row)
//   dos     bf16 sw128 [128 rows][256]          65536   dO of the block's rows
//   ks      bf16 sw128 [2 stages][64 keys][256] 65536   K tiles
//   vs      bf16 sw128 [64 keys][256]           32768   the V tile
//   qrow_s  I64 [128]                            1024   row index in q ([T·H], -1: no row)
//   pos_s   I32 [128]                             512   position in the sequence (-1: no row)
//   8 mbarriers                                    64   do_full, q_full, k_full[2], v_full,
//                                                       k_empty[2], v_empty
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "gpu/ops/cuda/attention_wgmma_backward.cuh"
#include "gpu/ops/cuda/attention_wgmma_forward.cuh"

namespace tandem::gpu::ops::cuda::attn::mma {

struct dq_wg_shape {
  static constexpr int d = 256;
  static constexpr int consumers = 2;                    // warpgroups that own rows
  static constexpr int threads = 128 * (consumers + 1);  // and one producer warpgroup
  static constexpr int block_rows = 64 * consumers;      // BM: the forward's at d 256
  static constexpr int key_tile = 64;                    // BN: the box rows of make_tma_keys at d 256
  static constexpr int k_stages = 2, v_stages = 1;
  // setmaxnreg budgets: they must fit in what the block holds at entry (see fwd_shape)
  static constexpr int entry_registers = (65536 / threads) / 8 * 8;
  static constexpr int producer_registers = 40, consumer_registers = 232;
  static constexpr std::size_t rows_bytes = static_cast<std::size_t>(block_rows) * d * 2;  // Q or dO
  static constexpr std::size_t kv_bytes = static_cast<std::size_t>(key_tile) * d * 2;      // one K or V tile
  static constexpr std::size_t barrier_bytes = 8 * sizeof(std::uint64_t);
  static constexpr std::size_t smem_bytes = 1024 /* alignment */ + 2 * rows_bytes + (k_stages + v_stages) * kv_bytes +
                                            block_rows * (sizeof(std::int64_t) + sizeof(std::int32_t)) + barrier_bytes;
  static_assert(block_rows == fwd_shape<256>::block_rows, "the forward's query layout and grid");
  static_assert(key_tile == fwd_shape<256>::key_tile, "the box of the tensor maps of make_tma_keys");
  static_assert(rows_bytes % 1024 == 0 && kv_bytes % 1024 == 0, "tiles stay 1024-byte aligned");
  static_assert(smem_bytes <= 232448, "the shared memory of one Hopper block");
  static_assert(128 * producer_registers + 128 * consumers * consumer_registers <= threads * entry_registers,
                "the registers the block holds at entry");
};

/// Block (x, y): the query tile numbered gridDim.x - 1 - x of layout (rows of
/// mma_tiling(H, G, 128)), kv head chunk y. Uses a.q, a.dout, a.lse_in, a.delta_in, a.dq,
/// a.accumulate_dq, a.scale, a.window; a.d must be 256, keys the maps of make_tma_keys.
__global__ void __launch_bounds__(dq_wg_shape::threads, 1)
    wgmma_dq_kernel(query_args<bf16> a, query_layout layout, const __grid_constant__ tma_keys keys) {
  using shape = dq_wg_shape;
  constexpr int D = shape::d, BM = shape::block_rows, BN = shape::key_tile;
  constexpr std::uint32_t KV_BYTES = static_cast<std::uint32_t>(shape::kv_bytes);
  extern __shared__ unsigned char smem_raw[];
  unsigned char* const smem = smem_raw + ((1024u - (shared_address(smem_raw) & 1023u)) & 1023u);
  unsigned char* const qs = smem;                                // sw128 [BM][D]
  unsigned char* const dos = qs + shape::rows_bytes;             // sw128 [BM][D]
  unsigned char* const ks = dos + shape::rows_bytes;             // 2 stages of sw128 [BN][D]
  unsigned char* const vs = ks + shape::k_stages * shape::kv_bytes;  // sw128 [BN][D]
  std::int64_t* const qrow_s = reinterpret_cast<std::int64_t*>(vs + shape::v_stages * shape::kv_bytes);  // [BM]
  std::int32_t* const pos_s = reinterpret_cast<std::int32_t*>(qrow_s + BM);                            // [BM]
  // barriers: do_full, q_full, k_full[2], v_full, k_empty[2], v_empty
  const std::uint32_t bars = shared_address(pos_s + BM);
  const std::uint32_t do_full = bars, q_full = bars + 8u, v_full = bars + 8u * 4, v_empty = bars + 8u * 7;
  const auto k_full = [&](int s) { return bars + 8u * (2 + s); };
  const auto k_empty = [&](int s) { return bars + 8u * (5 + s); };

  const query_tile tile = find_query_tile(layout);
  if (!tile.place.valid) return;
  for (int l = static_cast<int>(threadIdx.x); l < BM; l += shape::threads) {
    std::int64_t qrow = -1, pos = -1;
    query_row(layout, tile, l, qrow, pos);
    qrow_s[l] = qrow;
    pos_s[l] = static_cast<std::int32_t>(pos);  // positions fit 32 bits (cu_seqlens is I32)
  }
  if (threadIdx.x == 0) {
    wgmma::mbarrier_init(do_full, 128);
    wgmma::mbarrier_init(q_full, 128);
    for (int s = 0; s < shape::k_stages; ++s) {
      wgmma::mbarrier_init(k_full(s), 1);  // the copy engine's thread (and the bytes)
      wgmma::mbarrier_init(k_empty(s), 128 * shape::consumers / 32);
    }
    wgmma::mbarrier_init(v_full, 1);
    wgmma::mbarrier_init(v_empty, 128 * shape::consumers / 32);
    wgmma::mbarrier_init_fence();
  }
  __syncthreads();
  std::int32_t pmin, pmax;  // the least and greatest position of a row (every warp the same)
  position_range(pos_s, BM, pmin, pmax);
  if (pmax < 0) return;  // no row (uniform over the block)
  const int kmin = static_cast<int>(first_visible(pmin, a.window));
  const int kt_first = kmin / BN, kt_last = pmax / BN, tiles = kt_last - kt_first + 1;
  const int wg = static_cast<int>(threadIdx.x) >> 7, tid = static_cast<int>(threadIdx.x) & 127;

  if (wg == shape::consumers) {  // the producer
    wgmma::registers_down<shape::producer_registers>();
    const int g = static_cast<int>(tile.g), row0 = static_cast<int>(tile.place.start) + kt_first * BN;
    const auto issue_k = [&](int i) {  // K of tile i into stage i % 2, once tile i - 2 has released it
      const int s = i & 1;
      if (i >= 2) wgmma::mbarrier_wait(k_empty(s), static_cast<std::uint32_t>(((i >> 1) - 1) & 1));
      wgmma::mbarrier_arrive_expect_bytes(k_full(s), KV_BYTES);
#pragma unroll 1
      for (int c = 0; c < D / 64; ++c)
        wgmma::tensor_load_3d(shared_address(ks + s * shape::kv_bytes + c * BN * 128), &keys.k_map, c * 64, g, row0 + i * BN,
                              k_full(s));
    };
    const auto issue_v = [&](int i) {  // V of tile i, once tile i - 1 has released the stage
      if (i >= 1) wgmma::mbarrier_wait(v_empty, static_cast<std::uint32_t>((i - 1) & 1));
      wgmma::mbarrier_arrive_expect_bytes(v_full, KV_BYTES);
#pragma unroll 1
      for (int c = 0; c < D / 64; ++c)
        wgmma::tensor_load_3d(shared_address(vs + c * BN * 128), &keys.v_map, c * 64, g, row0 + i * BN, v_full);
    };
    const auto offset_of = [&](int l) { return qrow_s[l] >= 0 ? qrow_s[l] * D : std::int64_t{-1}; };
    load_sw128<D, BM, 128>(dos, a.dout, tid, offset_of);
    cp_async_commit();  // (wait_group waits for committed groups only)
    load_sw128<D, BM, 128>(qs, a.q, tid, offset_of);
    cp_async_commit();
    if (tid == 0) {  // the copies that wait on no release, while Q and dO are in flight
      issue_k(0);
      issue_v(0);
      if (tiles > 1) issue_k(1);
    }
    cp_async_wait<1>();  // this thread's part of dO has landed: publish it to the tensor cores
    wgmma::fence_proxy_async();
    wgmma::mbarrier_arrive(do_full);
    cp_async_wait<0>();  // and of Q
    wgmma::fence_proxy_async();
    wgmma::mbarrier_arrive(q_full);
    if (tid == 0) {  // one thread drives the copy engine: V_1, K_2, V_2, K_3, ... (release order)
#pragma unroll 1
      for (int i = 1; i < tiles; ++i) {
        issue_v(i);
        if (i + 1 < tiles) issue_k(i + 1);
      }
      // Stay until the consumers have released the last tiles: the copies in flight must not
      // outlive the thread that issued them.
      for (int i = tiles > 2 ? tiles - 2 : 0; i < tiles; ++i)
        wgmma::mbarrier_wait(k_empty(i & 1), static_cast<std::uint32_t>((i >> 1) & 1));
      wgmma::mbarrier_wait(v_empty, static_cast<std::uint32_t>((tiles - 1) & 1));
    }
    return;
  }

  wgmma::registers_up<shape::consumer_registers>();
  const int lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int row0 = wg * 64 + (tid >> 5) * 16 + g;  // this thread's rows: row0 (e = 0, 1) and row0 + 8 (e = 2, 3)
  const int pos0 = pos_s[row0], pos1 = pos_s[row0 + 8];  // -1: no row
  const int first0 = static_cast<int>(first_visible(pos0 < 0 ? 0 : pos0, a.window));
  const int first1 = static_cast<int>(first_visible(pos1 < 0 ? 0 : pos1, a.window));
  float lse20, lse21, delta0, delta1;  // log2(e)·lse (+inf: no row) and D of the two rows
  {
    const std::int64_t qrow0 = qrow_s[row0], qrow1 = qrow_s[row0 + 8];
    lse20 = qrow0 >= 0 ? __fmul_rn(a.lse_in[qrow0], log2e) : INFINITY;
    lse21 = qrow1 >= 0 ? __fmul_rn(a.lse_in[qrow1], log2e) : INFINITY;
    delta0 = qrow0 >= 0 ? a.delta_in[qrow0] : 0.f;
    delta1 = qrow1 >= 0 ? a.delta_in[qrow1] : 0.f;
  }
  // A key tile every row sees whole needs no mask: the same bits as the masked path.
  const int full_first = static_cast<int>(first_visible(pmax, a.window));
  const float scale2 = a.scale * log2e;

  float acc[128];  // dQ unscaled: acc[4i + e], row row0 (e < 2) or row0 + 8, column 8i + 2t + (e & 1)
#pragma unroll
  for (int e = 0; e < 128; ++e) acc[e] = 0.f;
  const std::uint32_t q_addr = shared_address(qs) + wg * 64 * 128, do_addr = shared_address(dos) + wg * 64 * 128;
  const std::uint32_t k_addr0 = shared_address(ks), v_addr = shared_address(vs);
  wgmma::mbarrier_wait(do_full, 0);

#pragma unroll 1
  for (int i = 0; i < tiles; ++i) {
    const int s = i & 1, j0 = (kt_first + i) * BN;
    const std::uint32_t k_addr = k_addr0 + static_cast<std::uint32_t>(s) * KV_BYTES;

    // dP = dO·Vᵀ, then S = Q·Kᵀ (x[4i + e]: row row0 (e < 2) or row0 + 8, key j0 + 8i + 2t + (e & 1))
    float dp[32], x[32];
    wgmma::mbarrier_wait(v_full, static_cast<std::uint32_t>(i & 1));
    wgmma::fence_proxy_async();
    wgmma::fence();
    issue_scores<D, BM, BN>(dp, do_addr, v_addr);
    wgmma::commit();
    if (i == 0) wgmma::mbarrier_wait(q_full, 0);
    wgmma::mbarrier_wait(k_full(s), static_cast<std::uint32_t>((i >> 1) & 1));
    wgmma::fence_proxy_async();
    wgmma::fence();
    issue_scores<D, BM, BN>(x, q_addr, k_addr);
    wgmma::commit();
    wgmma::wait<1>();  // dP is done: V is free
    wgmma::fence_registers(dp);
    __syncwarp();
    if (lane == 0) wgmma::mbarrier_arrive(v_empty);
    wgmma::wait<0>();
    wgmma::fence_registers(x);

    // P and dS (into x)
    if (j0 + BN - 1 <= pmin && j0 >= full_first) {  // uniform over the block
#pragma unroll
      for (int e = 0; e < 32; ++e) {
        const float p = exp2_approx(fmaf(x[e], scale2, (e & 2) == 0 ? -lse20 : -lse21));
        x[e] = __fmul_rn(p, dp[e] - ((e & 2) == 0 ? delta0 : delta1));
      }
    } else {
#pragma unroll
      for (int e = 0; e < 32; ++e) {
        const int j = j0 + (e >> 2) * 8 + 2 * t + (e & 1);
        const bool visible = (e & 2) == 0 ? (pos0 >= 0 && j >= first0 && j <= pos0) : (pos1 >= 0 && j >= first1 && j <= pos1);
        const float p = exp2_approx(fmaf(x[e], scale2, (e & 2) == 0 ? -lse20 : -lse21));
        x[e] = visible ? __fmul_rn(p, dp[e] - ((e & 2) == 0 ? delta0 : delta1)) : 0.f;
      }
    }
    // dQ += dS·K: K rows kk·16.. of the stage (the reduction), its 256 columns N-major
    accumulate_tiles<BN>(acc, x, k_addr);
    __syncwarp();
    if (lane == 0) wgmma::mbarrier_arrive(k_empty(s));
  }

  // dq row = scaling · acc (+ the old row), one rounding to bf16; no row: nothing written. The old
  // values are read unconditionally (row 0 stands in for a missing row) and only the stores are
  // predicated: a branch per element around the load capped the consumers' registers near 168
  // (ptxas then spilled the accumulators around every product).
  const std::int64_t qrow0 = qrow_s[row0], qrow1 = qrow_s[row0 + 8];
  bf16* const dq0 = a.dq + (qrow0 >= 0 ? qrow0 : 0) * D + 2 * t;
  bf16* const dq1 = a.dq + (qrow1 >= 0 ? qrow1 : 0) * D + 2 * t;
  const auto value = [&](const bf16* p, float x0, float x1) {
    x0 = __fmul_rn(a.scale, x0);
    x1 = __fmul_rn(a.scale, x1);
    if (a.accumulate_dq) {
      const __nv_bfloat162 old = *reinterpret_cast<const __nv_bfloat162*>(p);
      x0 = __fadd_rn(__low2float(old), x0);
      x1 = __fadd_rn(__high2float(old), x1);
    }
    return pack_bf16(x0, x1);
  };
  if (!a.accumulate_dq) {  // one rounding of scaling · acc: packed, a quad transposes the words, 16-byte stores
    bf16* const out0 = a.dq + (qrow0 >= 0 ? qrow0 : 0) * D;
    bf16* const out1 = a.dq + (qrow1 >= 0 ? qrow1 : 0) * D;
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      std::uint32_t w0[4], w1[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int i = 4 * k + j;
        w0[j] = pack_bf16(__fmul_rn(a.scale, acc[4 * i]), __fmul_rn(a.scale, acc[4 * i + 1]));
        w1[j] = pack_bf16(__fmul_rn(a.scale, acc[4 * i + 2]), __fmul_rn(a.scale, acc[4 * i + 3]));
      }
      quad_transpose(w0, t);
      quad_transpose(w1, t);
      const int col = (4 * k + t) * 8;
      if (qrow0 >= 0) *reinterpret_cast<uint4*>(out0 + col) = make_uint4(w0[0], w0[1], w0[2], w0[3]);
      if (qrow1 >= 0) *reinterpret_cast<uint4*>(out1 + col) = make_uint4(w1[0], w1[1], w1[2], w1[3]);
    }
    return;
  }
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    const std::uint32_t v0 = value(dq0 + 8 * i, acc[4 * i], acc[4 * i + 1]);
    const std::uint32_t v1 = value(dq1 + 8 * i, acc[4 * i + 2], acc[4 * i + 3]);
    if (qrow0 >= 0) *reinterpret_cast<std::uint32_t*>(dq0 + 8 * i) = v0;
    if (qrow1 >= 0) *reinterpret_cast<std::uint32_t*>(dq1 + 8 * i) = v1;
  }
}

// ---------------------------------------------------------------------------------------------
// launcher

/// Grid (query tiles of mma_tiling(H, G, forward_block_rows(256)), kv heads x head chunks), as the
/// forward's; keys from make_tma_keys (boxes of 64 positions); a.d 256, bf16, 16-byte aligned rows.
inline status launch_wgmma_dq(cudaStream_t stream, const char* op, dim3 grid, const query_args<bf16>& a,
                              const query_layout& layout, const tma_keys& keys) {
  using shape = dq_wg_shape;
  if (a.d != shape::d || keys.d != shape::d)
    return {status_code::unsupported, std::string(op) + ": the wgmma dq kernel takes head dim 256 only"};
  constexpr auto kernel = &wgmma_dq_kernel;
  TANDEM_RETURN_IF_ERROR(allow_shared_memory<kernel>(shape::smem_bytes));
  kernel<<<grid, shape::threads, shape::smem_bytes, stream>>>(a, layout, keys);
  return launch_status(op, "wgmma_dq_kernel");
}

}  // namespace tandem::gpu::ops::cuda::attn::mma
