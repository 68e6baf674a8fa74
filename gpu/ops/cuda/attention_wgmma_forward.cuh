// The forward of bfloat16 attention at head dims 256 and 512 on Hopper's warpgroup tensor cores
// (wgmma, sm_90a; nvcc only; private to attention.cu and paged_attention.cu). Flash style: a block
// of two warpgroups owns the query rows of one tile at a time (the GQA heads of one kv head times
// consecutive positions, attn::query_layout; one tile a block, or a persistent grid whose blocks
// take tiles in turn), streams key and value tiles through a two-stage pipeline in shared memory
// (tile kt + 1 lands while tile kt is computed; the ring runs on from one query tile to the next),
// and keeps an online softmax in f32 registers. Q·Kᵀ takes both operands from shared memory; P·V
// takes P from registers (the score accumulators, rounded to bf16) and V from shared memory,
// transposed.
//
//   d 256: each warpgroup owns 64 rows (block of 128 rows), key tiles of 64 positions; a thread
//          holds 32 scores and 128 output accumulators.
//   d 512: both warpgroups own the same 64 rows; warpgroup w computes the partial scores over
//          columns [256w, 256w + 256) and its half of the output; the partials meet in shared
//          memory and each warpgroup adds them in warpgroup order (identical bits in both), so
//          both run the same softmax. Key tiles of 32 positions (two stages of K and V fit).
//
// Per row (attention_softmax.cuh, the routine the decode kernel shares): s2 = scaling·log2(e)·q·k
// (-inf where masked), m = running max, p = exp2(s2 - m),
// l = Σ p (f32, unrounded p), p rounded to bf16 as the A operand of P·V, out = acc · (1 / l),
// lse = ln 2 · m + ln l. Key tiles sit at multiples of the key tile in POSITION space; a tile a
// row sees nothing of leaves its m, l and acc unchanged, and a row's numbers never depend on the
// other rows of its tile (an output element of a matrix product uses only its row of A), so the
// packed and the paged kernels (Keys) give a row the same bits. The sign of an exact zero output
// is canonicalised (+0). Keys and values must be finite (a masked key's value still meets a zero
// probability in the product).
//
// Roles and pipeline of one block (three warpgroups; the consumers own the rows, the producer
// only copies, with few registers, so the consumers can hold 128 accumulators and the scores):
//
//   producer (warpgroup 2), item n (a query tile; slot = n % 2):
//                            [n >= 2: wait item_empty[slot]] the item's rows and positions into the
//                            slot [n = 0: cp.async Q now], their range -> item_full[slot] (after
//                            the last item: "last"); K/V of its first key tile; [n >= 1: wait
//                            q_empty (item n - 1's last Q·Kᵀ done), cp.async Q] wait for Q
//                            -> q_full; K/V of its other key tiles.
//                            Key tile j over all items (stage s = j % 2, round r = j / 2):
//                            [j >= 2: wait k_empty[s] of round r - 1] K_j -> k_full[s];
//                            [j >= 2: wait v_empty[s] of round r - 1] V_j -> v_full[s];
//                            at the end (copy engine) wait until the last two tiles are released
//   consumer (warpgroups 0, 1), item n: wait item_full[slot]; stop at "last"; wait q_full; then
//                            per key tile j:
//                            wait k_full[s] (round r); issue S = Q·Kᵀ (wgmma)
//                            [j > first: wait v_full of tile j - 1; issue acc += P_{j-1}·V_{j-1}]
//                            wait for S only (P·V runs on); release k_empty[s] (the item's last
//                            tile: and q_empty)
//                            [d 512: partials through shared memory (two buffers), barrier, add]
//                            mask, online softmax on a copy of S
//                            [j > first: wait for P·V; release v_empty of tile j - 1]
//                            rescale acc; P_j = the copy as bf16 A fragments
//                            after the item's last tile: acc += P_j·V_j (wait; release v_empty),
//                            read its row indices, release item_empty[slot], store out (16 bytes
//                            a lane) and lse
//
// Packed keys (tma_keys) are copied by the bulk tensor copy engine: one producer thread issues a
// copy per 64 columns of a tile, and the full barrier completes when the tile's bytes have landed
// (rows past the batch read as zeros; rows of neighbouring sequences are masked like any other).
// Paged keys, whose rows come from scattered cache blocks, are copied with cp.async by the
// producer's 128 threads, the full barrier completing when every thread's copies have landed. An
// empty barrier completes when the 8 consumer warps have released the stage. The consumers never
// wait on each other (but at d 512, to meet their partial scores), so one warpgroup's softmax runs
// while the other's products occupy the tensor cores. Every wait traps after 10 seconds
// (wgmma::mbarrier_wait): a lost signal fails the launch instead of hanging the stream.

#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "gpu/ops/cuda/attention_mma_common.cuh"
#include "gpu/ops/cuda/attention_softmax.cuh"
#include "gpu/ops/cuda/launch.h"
#include "gpu/ops/cuda/wgmma.cuh"
#include "gpu/ops/op_check.h"

namespace tandem::gpu::ops::cuda::attn::mma {

/// What the producer tells the consumers about an item (one of two slots in shared memory).
struct forward_item_info {
  std::int64_t kt_first, kt_last, pmin, pmax;
  std::int32_t last;  // 1: no more items (the consumers stop)
};

template <int D>
struct fwd_shape {
  static constexpr int consumers = 2;                    // warpgroups that own rows
  static constexpr int threads = 128 * (consumers + 1);  // and one producer warpgroup
  static constexpr int ns = D / 256;                     // consumer warpgroups per row group
  static constexpr int block_rows = 64 * consumers / ns;  // BM
  static constexpr int key_tile = D == 512 ? 32 : 64;    // BN
  static constexpr int dw = D / ns;                      // columns of a warpgroup (256)
  static constexpr int score_regs = key_tile / 2;        // m64nBN accumulators per thread
  // setmaxnreg moves registers between the warpgroups of the block: at entry each thread holds
  // the launch cap (65536 / threads, rounded down to 8), and the new budgets must fit in what the
  // block holds, or the consumers' increase waits forever.
  static constexpr int entry_registers = (65536 / threads) / 8 * 8;
  static constexpr int producer_registers = 40, consumer_registers = 232;
  static constexpr std::size_t q_bytes = static_cast<std::size_t>(block_rows) * D * 2;
  static constexpr std::size_t kv_bytes = static_cast<std::size_t>(key_tile) * D * 2;  // one K or V tile
  static constexpr std::size_t exchange_floats = ns > 1 ? 2 * static_cast<std::size_t>(128 * consumers) * score_regs : 0;
  static constexpr std::size_t barrier_bytes = 14 * sizeof(std::uint64_t);
  // two slots of an item's rows (row index, position) and what the consumers need of it
  static constexpr std::size_t item_bytes = 2 * static_cast<std::size_t>(block_rows) * (sizeof(std::int64_t) + sizeof(std::int32_t)) +
                                            2 * sizeof(forward_item_info);
  static constexpr std::size_t smem_bytes = 1024 /* alignment */ + q_bytes + 4 * kv_bytes +
                                            exchange_floats * sizeof(float) + item_bytes + barrier_bytes;
  static_assert(smem_bytes <= 227 * 1024, "the shared memory of one block on an SM");
  static_assert(dw == 256, "a warpgroup owns 256 output columns (128 accumulators per thread)");
  static_assert(q_bytes % 1024 == 0 && kv_bytes % 1024 == 0, "tiles stay 1024-byte aligned");
  static_assert(128 * producer_registers + 128 * consumers * consumer_registers <= threads * entry_registers,
                "the registers the block holds at entry");
};

/// Keys and values of a packed batch with the bulk tensor copy engine's maps of them: 3-d
/// (d, G, T), boxes of (64 columns, 1 kv head, one key tile of positions), 128-byte swizzle (the
/// sw128 layout), rows past T read as zeros. The producer of a block then copies a tile with one
/// instruction per 64 columns instead of one per 16 bytes.
struct tma_keys : packed_keys<bf16> {
  CUtensorMap k_map, v_map;
};

template <class Keys>
constexpr bool has_tensor_maps = false;
template <>
constexpr bool has_tensor_maps<tma_keys> = true;

/// cp.async of ROWS rows of D bf16 into the sw128 tile dst: row r from src + offset_of(r) (an
/// element offset; -1: zeros), by the THREADS threads numbered `thread` = 0 .. THREADS - 1.
template <int D, int ROWS, int THREADS, class OffsetOf>
__device__ __forceinline__ void load_sw128(unsigned char* dst, const bf16* src, int thread, OffsetOf offset_of) {
  constexpr int chunks = D / 8;  // 16-byte chunks per row
  static_assert(THREADS % chunks == 0, "a thread keeps one chunk column");
  constexpr int rows_per_pass = THREADS / chunks;
  const int chunk = thread % chunks;
  unsigned char* const column = dst + (chunk >> 3) * ROWS * 128;
#pragma unroll 4
  for (int r = thread / chunks; r < ROWS; r += rows_per_pass) {
    const std::int64_t off = offset_of(r);
    cp_async16(reinterpret_cast<bf16*>(column + r * 128 + (((chunk & 7) ^ (r & 7)) << 4)),
               off >= 0 ? src + off + chunk * 8 : src, off >= 0);
  }
}

/// The work of a forward launch: items i = 0 .. tiles · chunks - 1, item i being query tile number
/// tiles - 1 - i / chunks (the longest rows first) of kv head x head chunk i % chunks; block b
/// takes items b, b + gridDim.x, b + 2 gridDim.x, ... (one block an item, or a persistent grid).
struct forward_items {
  std::int64_t tiles;
  unsigned chunks;
};

/// out, lse of the rows of `layout` (forward arguments of attn::query_args: q, out, lse_out, scale, window).
template <int D, class Keys>
__global__ void __launch_bounds__(fwd_shape<D>::threads, 1)
    wgmma_forward_kernel(query_args<bf16> a, query_layout layout, forward_items items, const __grid_constant__ Keys keys) {
  using shape = fwd_shape<D>;
  constexpr int NS = shape::ns, BM = shape::block_rows, BN = shape::key_tile, DW = shape::dw;
  constexpr int SR = shape::score_regs, CONSUMER_THREADS = 128 * shape::consumers;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* const smem = smem_raw + ((1024u - (shared_address(smem_raw) & 1023u)) & 1023u);
  unsigned char* const qs = smem;                                   // sw128 [BM][D]
  unsigned char* const ks = qs + shape::q_bytes;                    // 2 stages of sw128 [BN][D]
  unsigned char* const vs = ks + 2 * shape::kv_bytes;               // 2 stages of sw128 [BN][D]
  float* const exch = reinterpret_cast<float*>(vs + 2 * shape::kv_bytes);   // [2][consumer warpgroups][SR][128]
  std::int64_t* const qrow_s = reinterpret_cast<std::int64_t*>(exch + shape::exchange_floats);  // [2 slots][BM]
  std::int32_t* const pos_s = reinterpret_cast<std::int32_t*>(qrow_s + 2 * BM);                // [2 slots][BM]
  forward_item_info* const info_s = reinterpret_cast<forward_item_info*>(pos_s + 2 * BM);      // [2 slots]
  // barriers: q_full, k_full[2], v_full[2], k_empty[2], v_empty[2], item_full[2], item_empty[2], q_empty
  const std::uint32_t bars = shared_address(info_s + 2);
  const std::uint32_t q_full = bars, q_empty = bars + 8u * 13;
  const auto k_full = [&](int s) { return bars + 8u * (1 + s); };
  const auto v_full = [&](int s) { return bars + 8u * (3 + s); };
  const auto k_empty = [&](int s) { return bars + 8u * (5 + s); };
  const auto v_empty = [&](int s) { return bars + 8u * (7 + s); };
  const auto item_full = [&](int s) { return bars + 8u * (9 + s); };
  const auto item_empty = [&](int s) { return bars + 8u * (11 + s); };

  if (threadIdx.x == 0) {
    wgmma::mbarrier_init(q_full, 128);
    wgmma::mbarrier_init(q_empty, CONSUMER_THREADS / 32);
    const std::uint32_t copiers = has_tensor_maps<Keys> ? 1 : 128;  // arrivals that fill a stage
    for (int s = 0; s < 2; ++s) {
      wgmma::mbarrier_init(k_full(s), copiers);
      wgmma::mbarrier_init(v_full(s), copiers);
      wgmma::mbarrier_init(k_empty(s), CONSUMER_THREADS / 32);
      wgmma::mbarrier_init(v_empty(s), CONSUMER_THREADS / 32);
      wgmma::mbarrier_init(item_full(s), 128);
      wgmma::mbarrier_init(item_empty(s), CONSUMER_THREADS / 32);
    }
    wgmma::mbarrier_init_fence();
    if constexpr (has_tensor_maps<Keys>) {  // the maps' descriptors on their way before the first copy
      wgmma::prefetch_tensor_map(&keys.k_map);
      wgmma::prefetch_tensor_map(&keys.v_map);
    }
  }
  __syncthreads();
  // Launched as a dependent of the tile numbering (tile_offsets_kernel): the block is resident and
  // its barriers set while the offsets are summed; nothing global is read before they are complete.
  wait_for_prior_grid();
  const int wg = static_cast<int>(threadIdx.x) >> 7, tid = static_cast<int>(threadIdx.x) & 127;
  const std::int64_t item_count = items.tiles * items.chunks;

  if (wg == shape::consumers) {  // the producer: places each item's rows, loads Q, streams K and V
    wgmma::registers_down<shape::producer_registers>();
    int published = 0;       // items handed to the consumers
    std::uint32_t sent = 0;  // key tiles issued over all items (stage sent % 2, round sent / 2)
    // The cp.async of the Q rows placed in `slot` (committed as one group).
    const auto load_q = [&](int slot) {
      load_sw128<D, BM, 128>(qs, a.q, tid, [&](int l) {
        const std::int64_t r = qrow_s[slot * BM + l];
        return r >= 0 ? r * D : std::int64_t{-1};
      });
      cp_async_commit();  // (wait_group waits for committed groups only)
    };
    for (std::int64_t item = blockIdx.x;; item += gridDim.x) {
      const bool last = item >= item_count;
      query_tile tile{};
      if (!last) {
        tile = find_query_tile_at(layout, items.tiles - 1 - item / items.chunks, static_cast<unsigned>(item % items.chunks));
        if (!tile.place.valid) continue;  // past the last tile (uniform over the warpgroup)
      }
      const int slot = published & 1;
      if (published >= 2) wgmma::mbarrier_wait(item_empty(slot), static_cast<std::uint32_t>(((published >> 1) - 1) & 1));
      for (int l = tid; l < BM; l += 128) {
        std::int64_t qrow = -1, pos = -1;
        if (!last) query_row(layout, tile, l, qrow, pos);
        qrow_s[slot * BM + l] = qrow;
        pos_s[slot * BM + l] = static_cast<std::int32_t>(pos);  // positions fit 32 bits (cu_seqlens is I32)
      }
      named_barrier(2, 128);
      // A block's first Q has no earlier item to wait for: it is copied as soon as its rows are
      // placed, before the position range and the first keys (the consumers' longest wait of a
      // short item, a sliding window's, was this copy).
      const bool q_early = published == 0 && !last;
      if (q_early) load_q(slot);
      std::int32_t pmin, pmax;  // over the item's rows (every warp finds the same)
      position_range(pos_s + slot * BM, BM, pmin, pmax);
      if (!last && pmax < 0) {  // no row: not handed over (the slot is rewritten by the next item)
        cp_async_wait<0>();     // an early Q's copies land before the next item copies its own
        named_barrier(2, 128);
        continue;
      }
      const std::int64_t kt_first = last ? 0 : first_visible(pmin, a.window) / BN, kt_last = last ? -1 : pmax / BN;
      if (tid == 0) info_s[slot] = forward_item_info{kt_first, kt_last, pmin, pmax, last ? 1 : 0};
      wgmma::mbarrier_arrive(item_full(slot));  // releases the slot's rows and info to the consumers
      ++published;
      if (last) break;
      const int tiles = static_cast<int>(kt_last - kt_first + 1);
      // The copy engine's thread issues tile i of the item (stage sent % 2) once the stage is free.
      const auto issue = [&](int i) {
        if constexpr (has_tensor_maps<Keys>) {
          const int s = static_cast<int>(sent & 1), g = static_cast<int>(tile.g);
          const int row = static_cast<int>(tile.place.start + (kt_first + i) * BN);
          const std::uint32_t prior = ((sent >> 1) - 1) & 1;
          if (sent >= 2) wgmma::mbarrier_wait(k_empty(s), prior);
          wgmma::mbarrier_arrive_expect_bytes(k_full(s), static_cast<std::uint32_t>(shape::kv_bytes));
#pragma unroll 1
          for (int c = 0; c < D / 64; ++c)
            wgmma::tensor_load_3d(shared_address(ks + s * shape::kv_bytes + c * BN * 128), &keys.k_map, c * 64, g, row, k_full(s));
          if (sent >= 2) wgmma::mbarrier_wait(v_empty(s), prior);
          wgmma::mbarrier_arrive_expect_bytes(v_full(s), static_cast<std::uint32_t>(shape::kv_bytes));
#pragma unroll 1
          for (int c = 0; c < D / 64; ++c)
            wgmma::tensor_load_3d(shared_address(vs + s * shape::kv_bytes + c * BN * 128), &keys.v_map, c * 64, g, row, v_full(s));
          ++sent;
        }
      };
      // The item's first keys before its Q: their stage was freed by the last item's next-to-last
      // tile, so they load while that item finishes (and, in a block's first item, beside Q).
      if constexpr (has_tensor_maps<Keys>) {
        if (tid == 0) issue(0);
      }
      // Q, once the consumers' products of the last item no longer read it.
      if (!q_early) {
        if (published >= 2) wgmma::mbarrier_wait(q_empty, static_cast<std::uint32_t>((published - 2) & 1));
        load_q(slot);
      }
      cp_async_wait<0>();  // this thread's part of Q has landed: publish it to the tensor cores
      wgmma::fence_proxy_async();
      wgmma::mbarrier_arrive(q_full);
      if constexpr (has_tensor_maps<Keys>) {  // one thread drives the copy engine
        if (tid == 0)
          for (int i = 1; i < tiles; ++i) issue(i);  // (only this thread counts `sent` on this path)
      } else {
        const std::int64_t kmin = first_visible(pmin, a.window), kmax = pmax;
        for (int i = 0; i < tiles; ++i, ++sent) {
          const int s = static_cast<int>(sent & 1);
          const std::uint32_t prior = ((sent >> 1) - 1) & 1;
          const std::int64_t j0 = (kt_first + i) * BN;
          const auto offset_of = [&](int jl) {
            const std::int64_t j = j0 + jl;
            return j >= kmin && j <= kmax ? keys.offset(tile.place.seq, tile.place.start, j, tile.g) : std::int64_t{-1};
          };
          if (sent >= 2) wgmma::mbarrier_wait(k_empty(s), prior);
          load_sw128<D, BN, 128>(ks + s * shape::kv_bytes, keys.k, tid, offset_of);
          wgmma::mbarrier_arrive_on_copies(k_full(s));
          if (sent >= 2) wgmma::mbarrier_wait(v_empty(s), prior);
          load_sw128<D, BN, 128>(vs + s * shape::kv_bytes, keys.v, tid, offset_of);
          wgmma::mbarrier_arrive_on_copies(v_full(s));
        }
      }
    }
    if (has_tensor_maps<Keys> && tid == 0) {
      // Stay until the consumers have released the last tiles: the copies in flight must not
      // outlive the thread that issued them.
      for (std::uint32_t i = sent > 2 ? sent - 2 : 0; i < sent; ++i) {
        wgmma::mbarrier_wait(k_empty(static_cast<int>(i & 1)), (i >> 1) & 1);
        wgmma::mbarrier_wait(v_empty(static_cast<int>(i & 1)), (i >> 1) & 1);
      }
    }
    cp_async_commit();
    cp_async_wait<0>();  // no copy outlives its thread
    return;
  }

  wgmma::registers_up<shape::consumer_registers>();
  const int rg = wg / NS, sub = wg % NS;  // row group, column half
  const int lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int row0 = rg * 64 + (tid >> 5) * 16 + g;  // this thread's rows: row0 (e = 0, 1) and row0 + 8 (e = 2, 3)
  const float scale2 = a.scale * log2e;
  const std::uint32_t q_addr = shared_address(qs) + rg * 64 * 128;
  const std::uint32_t k_addr0 = shared_address(ks), v_addr0 = shared_address(vs);
  std::uint32_t taken = 0;  // key tiles consumed over all items (stage taken % 2, round taken / 2)

  // One loop over the key tiles of all the block's items; an item's epilogue and the next item's
  // setup sit at the bottom of its last tile, the first item's setup before the loop. (With a loop
  // of items around the tile loop, ptxas held the consumers to the launch's 168 registers, spilled
  // and serialised the products: docs/cuda-kernel-notes.md.)
  int n = 0, slot = 0;  // the item and its slot
  wgmma::mbarrier_wait(item_full(0), 0);
  forward_item_info item = info_s[0];
  if (item.last) return;
  int pos0 = pos_s[row0], pos1 = pos_s[row0 + 8];  // -1: no row
  int first0 = static_cast<int>(first_visible(pos0 < 0 ? 0 : pos0, a.window));
  int first1 = static_cast<int>(first_visible(pos1 < 0 ? 0 : pos1, a.window));
  // A key tile every row sees whole needs no mask: the same bits as the masked path.
  std::int64_t full_first = first_visible(item.pmax, a.window);
  float o[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) o[i] = 0.f;
  online_row<SR, 0> row0_softmax;
  online_row<SR, 1> row1_softmax;
  wgmma::mbarrier_wait(q_full, 0);

  // Q·Kᵀ of tile i is issued before P·V of tile i - 1, so the tensor cores run the product while
  // this warpgroup's softmax of tile i waits only for Q·Kᵀ (FlashAttention 3's overlap within a
  // warpgroup). o is rescaled by tile i's alpha once P·V of tile i - 1 has landed: the same
  // operations in the same order as one tile at a time (o·alpha_i + P_i·V_i), so the same bits.
  std::uint32_t pa[BN / 16][4];  // P of the previous tile (A operand of its P·V), when `pending`
  bool pending = false;
  std::uint32_t pending_stage = 0, pending_round = 0;
  const auto issue_pv = [&](std::uint32_t stage, std::uint32_t round) {  // o += P·V of a stage
    const std::uint32_t v_addr = v_addr0 + stage * static_cast<std::uint32_t>(shape::kv_bytes) + (sub * DW >> 6) * BN * 128;
    wgmma::mbarrier_wait(v_full(static_cast<int>(stage)), round);
    wgmma::fence_proxy_async();
    wgmma::fence();
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk)
      wgmma::mma_rs_m64n256k16_tn(o, pa[kk], wgmma::sw128_desc(v_addr + kk * 16 * 128, BN * 128, 1024));
    wgmma::commit();
  };
  const auto finish_pv = [&](std::uint32_t stage) {  // after wait: release the V stage
    wgmma::fence_registers(o);
    __syncwarp();
    if (lane == 0) wgmma::mbarrier_arrive(v_empty(static_cast<int>(stage)));
  };

  for (std::int64_t kt = item.kt_first;; ++taken) {
    const int stage = static_cast<int>(taken & 1);
    const std::uint32_t round = (taken >> 1) & 1;

    // s = Q·Kᵀ over this warpgroup's columns [sub·DW, (sub+1)·DW)
    float s[SR];  // written by the first product (no accumulate): zeroing it first made ptxas serialise
    const std::uint32_t k_addr = k_addr0 + stage * static_cast<std::uint32_t>(shape::kv_bytes);
    wgmma::mbarrier_wait(k_full(stage), round);
    wgmma::fence_proxy_async();
    wgmma::fence();
#pragma unroll
    for (int kk = 0; kk < DW / 16; ++kk) {
      const int c0 = sub * DW + kk * 16;
      const std::uint64_t da = wgmma::sw128_desc(q_addr + (c0 >> 6) * BM * 128 + (c0 & 63) * 2, 16, 1024);
      const std::uint64_t db = wgmma::sw128_desc(k_addr + (c0 >> 6) * BN * 128 + (c0 & 63) * 2, 16, 1024);
      if constexpr (BN == 64) wgmma::mma_ss_m64n64k16(s, da, db, kk > 0);
      else wgmma::mma_ss_m64n32k16(s, da, db, kk > 0);
    }
    wgmma::commit();
    const bool item_done = kt == item.kt_last;
    float alpha0, alpha1;
    // The softmax works on a copy of the scores: ptxas lets an instruction write a register of
    // Q·Kᵀ's accumulators only after wait_group 0, so with the scores updated in place it waited
    // for P·V before the exponentials. s stays live (untouched) until that wait.
    float p[SR];
    // The scores of this tile once Q·Kᵀ has landed: mask, scale, online softmax (rows row0: e = 0,
    // 1; row0 + 8: e = 2, 3; s[4i + e], n-tile i), P as the next A operand.
    const auto score = [&] {
      wgmma::fence_registers(s);
      __syncwarp();
      if (lane == 0) {
        wgmma::mbarrier_arrive(k_empty(stage));
        if (item_done) wgmma::mbarrier_arrive(q_empty);  // the producer may load the next item's Q
      }
      if constexpr (NS > 1) {  // the row group's partial sums, added in warpgroup order by both
        float* const buffer = exch + static_cast<std::size_t>(stage) * CONSUMER_THREADS * SR;
#pragma unroll
        for (int e = 0; e < SR; ++e) buffer[(wg * SR + e) * 128 + tid] = s[e];
        named_barrier(1, CONSUMER_THREADS);
#pragma unroll
        for (int e = 0; e < SR; ++e) {
          float sum = buffer[(rg * NS * SR + e) * 128 + tid];
#pragma unroll
          for (int w = 1; w < NS; ++w) sum = __fadd_rn(sum, buffer[((rg * NS + w) * SR + e) * 128 + tid]);
          p[e] = sum;
        }
      } else {
#pragma unroll
        for (int e = 0; e < SR; ++e) p[e] = s[e];
      }
      const int j0 = static_cast<int>(kt * BN);
      const bool whole = kt * BN + BN - 1 <= item.pmin && kt * BN >= full_first;  // uniform over the block
      const float mx0 = row0_softmax.scale_mask_max(p, j0, t, pos0, first0, whole, scale2);
      const float mx1 = row1_softmax.scale_mask_max(p, j0, t, pos1, first1, whole, scale2);
      alpha0 = row0_softmax.update(p, mx0);
      alpha1 = row1_softmax.update(p, mx1);
    };
    // Each path waits for every product it issued before o is touched again (a wait behind a
    // separate test of `pending` made ptxas serialise the products: it cannot pair the branches).
    if (pending) {
      issue_pv(pending_stage, pending_round);
      wgmma::wait<1>();  // Q·Kᵀ has landed (groups complete in order); P·V runs on
      score();
      wgmma::wait<0>();
      wgmma::fence_registers(s);  // (s live until here)
      finish_pv(pending_stage);
    } else {
      wgmma::wait<0>();
      score();
    }
    // Most tiles leave every row's max of the warp where it was (alpha = 1: online_row's lazy
    // rescaling): then o stays as it is, without 128 multiplications by one.
    if (__any_sync(0xffffffffu, alpha0 != 1.f || alpha1 != 1.f)) {
#pragma unroll
      for (int i = 0; i < 128; i += 4) {
        o[i] = __fmul_rn(o[i], alpha0);
        o[i + 1] = __fmul_rn(o[i + 1], alpha0);
        o[i + 2] = __fmul_rn(o[i + 2], alpha1);
        o[i + 3] = __fmul_rn(o[i + 3], alpha1);
      }
    }
    // P as the next A operand only now: pa is read by the P·V just waited for (converting into
    // other registers first let ptxas coalesce them with pa and wait before the exponentials).
    accumulators_as_a<BN / 16>(p, pa);
    pending = true;
    pending_stage = static_cast<std::uint32_t>(stage);
    pending_round = round;
    if (!item_done) {
      ++kt;
      continue;
    }
    // The item's last P·V.
    issue_pv(pending_stage, pending_round);
    wgmma::wait<0>();
    finish_pv(pending_stage);
    pending = false;

    // The item's last tile: out = acc · (1 / l) (a row with a real query has seen itself: l >= 1;
    // one division a row, not 128), an exact zero as +0, stored 16 bytes a lane after a transpose
    // within each quad (4-byte stores took 5-9 µs of an item's 30 on an H100; staging the outputs
    // in shared memory instead made ptxas keep the consumers at 168 registers and spill).
    const std::int64_t qrow0 = qrow_s[slot * BM + row0], qrow1 = qrow_s[slot * BM + row0 + 8];
    __syncwarp();
    if (lane == 0) wgmma::mbarrier_arrive(item_empty(slot));  // the slot's rows are read
    const float inv0 = row0_softmax.inverse(), inv1 = row1_softmax.inverse();
#pragma unroll
    for (int k = 0; k < 8; ++k) {  // column groups 4k .. 4k + 3 (8 columns each)
      std::uint32_t w0[4], w1[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int i = 4 * k + j;
        w0[j] = pack_bf16(scaled_output(o[4 * i], inv0), scaled_output(o[4 * i + 1], inv0));
        w1[j] = pack_bf16(scaled_output(o[4 * i + 2], inv1), scaled_output(o[4 * i + 3], inv1));
      }
      quad_transpose(w0, t);
      quad_transpose(w1, t);
      const int col = sub * DW + (4 * k + t) * 8;
      if (qrow0 >= 0) *reinterpret_cast<uint4*>(a.out + qrow0 * D + col) = make_uint4(w0[0], w0[1], w0[2], w0[3]);
      if (qrow1 >= 0) *reinterpret_cast<uint4*>(a.out + qrow1 * D + col) = make_uint4(w1[0], w1[1], w1[2], w1[3]);
    }
    if (sub == 0 && t == 0) {
      if (qrow0 >= 0) a.lse_out[qrow0] = row0_softmax.lse();
      if (qrow1 >= 0) a.lse_out[qrow1] = row1_softmax.lse();
    }

    // The next item.
    ++n;
    slot = n & 1;
    wgmma::mbarrier_wait(item_full(slot), static_cast<std::uint32_t>((n >> 1) & 1));
    item = info_s[slot];
    if (item.last) break;
    pos0 = pos_s[slot * BM + row0];
    pos1 = pos_s[slot * BM + row0 + 8];
    first0 = static_cast<int>(first_visible(pos0 < 0 ? 0 : pos0, a.window));
    first1 = static_cast<int>(first_visible(pos1 < 0 ? 0 : pos1, a.window));
    full_first = first_visible(item.pmax, a.window);
#pragma unroll
    for (int i = 0; i < 128; ++i) o[i] = 0.f;
    row0_softmax = online_row<SR, 0>{};
    row1_softmax = online_row<SR, 1>{};
    wgmma::mbarrier_wait(q_full, static_cast<std::uint32_t>(n & 1));
    kt = item.kt_first;
  }
}

// ---------------------------------------------------------------------------------------------
// launchers (shared by attention.cu and paged_attention.cu)

/// The bulk tensor copy map of `data` [tokens, heads, d] (bf16): 3-d (d, heads, tokens), boxes of
/// (64 columns, 1 head, `rows` positions), 128-byte swizzle (the sw128 layout), rows past `tokens`
/// read as zeros. `what` names the tensor in an error.
inline status encode_rows_map(const char* op, const char* what, const bf16* data, std::int64_t tokens, std::int64_t heads,
                              std::int64_t d, int rows, CUtensorMap& map) {
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
      fn = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  if (encode == nullptr)
    return {status_code::device_error, std::string(op) + ": the driver offers no cuTensorMapEncodeTiled (CUDA 12 or later needed)"};
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(d), static_cast<cuuint64_t>(heads), static_cast<cuuint64_t>(tokens)};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(d) * 2, static_cast<cuuint64_t>(heads * d) * 2};
  const cuuint32_t box[3] = {64, 1, static_cast<cuuint32_t>(rows)};
  const cuuint32_t steps[3] = {1, 1, 1};
  const CUresult r = encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, const_cast<bf16*>(data), dims, strides, box, steps,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return {status_code::device_error, std::string(op) + ": cuTensorMapEncodeTiled of the " + what + " failed (CUresult " +
                                           std::to_string(static_cast<int>(r)) + ")"};
  return status::ok();
}

/// The bulk tensor copy maps of packed keys and values for the forward at head dim d (256 or 512).
inline status make_tma_keys(const char* op, const packed_keys<bf16>& keys, tma_keys& out) {
  static_cast<packed_keys<bf16>&>(out) = keys;
  const int rows = keys.d == 512 ? fwd_shape<512>::key_tile : fwd_shape<256>::key_tile;
  TANDEM_RETURN_IF_ERROR(encode_rows_map(op, "keys", keys.k, keys.tokens, keys.kv_heads, keys.d, rows, out.k_map));
  return encode_rows_map(op, "values", keys.v, keys.tokens, keys.kv_heads, keys.d, rows, out.v_map);
}

/// Rows per block of the forward at head dim d (256 or 512): the block_rows of mma_tiling.
inline std::int64_t forward_block_rows(std::int64_t d) { return d == 512 ? fwd_shape<512>::block_rows : fwd_shape<256>::block_rows; }

template <int D, class Keys>
status launch_forward_dim(cudaStream_t stream, const char* op, dim3 grid, const query_args<bf16>& a,
                          const query_layout& layout, const Keys& keys, bool persistent) {
  constexpr std::size_t smem = fwd_shape<D>::smem_bytes;
  constexpr auto kernel = &wgmma_forward_kernel<D, Keys>;
  TANDEM_RETURN_IF_ERROR(allow_shared_memory<kernel>(smem));
  const forward_items items{static_cast<std::int64_t>(grid.x), grid.y};
  std::int64_t blocks = items.tiles * items.chunks;
  if (persistent) {  // one block an SM, each taking items in turn
    int device = 0, sms = 0;
    TANDEM_CUDA_CHECK(cudaGetDevice(&device));
    TANDEM_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    blocks = std::min<std::int64_t>(blocks, sms);
  }
  if (blocks <= 0) return status::ok();
  if (blocks > 0x7fffffffLL) return {status_code::unsupported, std::string(op) + ": too many query tiles for one CUDA grid"};
  // A dependent launch: the blocks start while the tile numbering before it finishes (the kernel
  // waits for it before reading anything). Its error, as a launch's, is the last error.
  static_cast<void>(launch_dependent(kernel, static_cast<unsigned>(blocks), fwd_shape<D>::threads, smem, stream, a, layout,
                                     items, keys));
  return launch_status(op, "wgmma_forward_kernel");
}

/// Query tiles of mma_tiling(H, G, forward_block_rows(d)) x (kv heads x head chunks) given as a
/// grid (tiles, chunks); d 256 or 512. A launch takes one block a tile, or with `persistent` one
/// block an SM, each taking tiles in turn: the next tile's rows, Q and first keys then load while
/// the last one is computed (short tiles: a sliding window).
template <class Keys>
status launch_forward(cudaStream_t stream, const char* op, dim3 grid, const query_args<bf16>& a,
                      const query_layout& layout, const Keys& keys, bool persistent = false) {
  if (a.d == 512) return launch_forward_dim<512>(stream, op, grid, a, layout, keys, persistent);
  return launch_forward_dim<256>(stream, op, grid, a, layout, keys, persistent);
}

}  // namespace tandem::gpu::ops::cuda::attn::mma
