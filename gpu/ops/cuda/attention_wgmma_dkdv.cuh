// The dK / dV pass of the bfloat16 attention backward at head dim 256 on Hopper's warpgroup tensor
// cores (wgmma, sm_90a; nvcc only; private to attention.cu). A block owns 64 key positions of one
// sequence and kv head (the numbering a.offsets of 64-key tiles): their K and V stay in shared
// memory, and the block walks its range of items (query head of the kv head, tile of 64 query
// positions from the keys' first position to the last query whose window holds them; heads
// outer), streaming each item's Q and dO through a two-stage ring filled by the bulk tensor copy
// engine. With the keys as the rows of every product (M = 64 keys):
//
//   Sᵀ  = K·Qᵀ     (SS, m64n64k16 x 16)       Pᵀ  = exp2(scaling·log2(e)·Sᵀ - log2(e)·lse)
//   dPᵀ = V·dOᵀ    (SS, m64n64k16 x 16)       dSᵀ = Pᵀ ⊙ (dPᵀ - D)
//   dV += Pᵀ·dO    (RS, m64n256k16 x 4, dO read N-major)
//   dK += dSᵀ·Q    (RS, m64n256k16 x 4, Q read N-major)        dk = scaling · dK
//
// A thread cannot hold both 64 x 256 float32 accumulators (256 registers), so the block's two
// warpgroups split the products: warpgroup 0 computes Sᵀ and Pᵀ and owns dV, warpgroup 1 computes
// dPᵀ and owns dK. Pᵀ (float32, unrounded) goes from 0 to 1 through shared memory in accumulator
// order (element e of thread t at [e][t]: both warpgroups hold the same fragment of a 64 x 64
// product), handed over by two named barriers. Pᵀ and dSᵀ are rounded to bf16 only as operands.
// Every (key, query) pair is summed in item order, then query order inside an item, so a result
// is deterministic; splits and their reduction are those of the mma.sync backward
// (attention_backward_common.cuh: dkdv_partials, dkdv_reduce_kernel).
//
// There is no producer warpgroup: with 256 threads a thread may hold 255 registers (a third
// warpgroup would cap the launch at 168, and ptxas kept this kernel at that cap despite
// setmaxnreg, spilling the scores). The copies are few (9 per item), so warp 0 of warpgroup 1,
// the warpgroup that finishes an item last, refills a stage once both have released it.
//
//   fill(i) (warp 4):   [i >= 2: wait empty[s] of round r - 1, s = i % 2, r = i / 2]
//                       lane 0: Q_i, dO_i -> full[s] (bytes); lanes: log2(e)·lse, D -> shared; arrive full[s]
//   start:              warp 4: K, V -> kv_full; fill(0), fill(1)
//   warpgroup 0, item i: wait full[s]; Sᵀ = K·Qᵀ; mask, Pᵀ; [i >= 1: sync p_free]; Pᵀ -> shared;
//                       arrive p_ready; dV += Pᵀ·dO; release empty[s]
//   warpgroup 1, item i: wait full[s]; dPᵀ = V·dOᵀ; sync p_ready; dSᵀ from Pᵀ (shared);
//                       [i + 1 < n: arrive p_free]; dK += dSᵀ·Q; release empty[s]; warp 4: fill(i + 2)
//
// Rows of Q and dO past the batch read as zeros, those of neighbouring sequences are masked; the
// log2(e)·lse of a query that is not one is +inf and its D 0, so its p is 0.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "gpu/ops/cuda/attention_backward_common.cuh"
#include "gpu/ops/cuda/attention_wgmma_backward.cuh"
#include "gpu/ops/cuda/attention_wgmma_forward.cuh"

namespace tandem::gpu::ops::cuda::attn::mma {

/// The bulk tensor copy maps of q and dout [T, H, d] for the wgmma dK / dV pass: 3-d (d, H, T),
/// boxes of (64 columns, 1 head, one item's 64 query positions), 128-byte swizzle.
struct tma_queries {
  CUtensorMap q_map, dout_map;
};

struct dkdv_wg_shape {
  static constexpr int d = 256;
  static constexpr int keys = 64;         // key positions per block (rows of every product)
  static constexpr int query_tile = 64;   // query positions per item
  static constexpr int threads = 256;     // two warpgroups, up to 255 registers a thread
  static constexpr std::size_t tile_bytes = static_cast<std::size_t>(keys) * d * 2;  // K, V, a Q or a dO stage
  static constexpr std::size_t p_floats = 32 * 128;                                  // Pᵀ in accumulator order
  static constexpr std::size_t barrier_bytes = 5 * sizeof(std::uint64_t);
  static constexpr std::size_t smem_bytes = 1024 /* alignment */ + 6 * tile_bytes + p_floats * sizeof(float) +
                                            2 * 2 * query_tile * sizeof(float) + barrier_bytes;
  static_assert(query_tile == keys, "Q, dO, K and V tiles share one box shape");
  static_assert(tile_bytes % 1024 == 0, "tiles stay 1024-byte aligned");
  static_assert(smem_bytes <= 232448, "the shared memory of one Hopper block");
};

/// What a block of wgmma_dkdv_kernel works on. Positions and tokens fit 32 bits (cu_seqlens is I32).
struct dkdv_work {
  std::int64_t split, g;
  int start;           // token of the sequence's position 0
  int first_key;       // the block's keys: positions first_key .. j_last
  int j_last, q_last;  // the last query whose window holds a key of the block
  int tiles_per_head;  // query tiles of one head
  int n;               // items of the block's range, the first: query tile qt_begin of head h_begin
  int qt_begin, h_begin;
};

/// The work of unit `unit` = (key tile · G + kv head) · splits + split (64-key tiles, numbering
/// a.offsets): a block of wgmma_dkdv_kernel, a cluster of the head-dim-512 kernel.
__device__ __forceinline__ dkdv_work find_dkdv_work(const dkdv_args<bf16>& a, const dkdv_partials& part, std::int64_t unit) {
  constexpr int KEYS = dkdv_wg_shape::keys, BQ = dkdv_wg_shape::query_tile;
  dkdv_work w{};
  w.split = unit % part.splits;
  const std::int64_t tile_head = unit / part.splits;
  const tile_place place = find_tile(a.offsets, a.cu, a.num_seqs, tile_head / a.kv_heads, KEYS);
  w.g = tile_head % a.kv_heads;
  const std::int64_t j0 = place.first;
  const std::int64_t j_last = (j0 + KEYS < place.length ? j0 + KEYS : place.length) - 1;
  const std::int64_t q_last = a.window > 0 && j_last + a.window - 1 < place.length - 1 ? j_last + a.window - 1
                                                                                      : place.length - 1;
  const std::int64_t query_tiles = (q_last - j0) / BQ + 1;
  const std::int64_t items = a.group * query_tiles;  // (head, query tile), heads outer
  const std::int64_t item_begin = items * w.split / part.splits, item_end = items * (w.split + 1) / part.splits;
  w.start = static_cast<int>(place.start);
  w.first_key = static_cast<int>(j0);
  w.j_last = static_cast<int>(j_last);
  w.q_last = static_cast<int>(q_last);
  w.tiles_per_head = static_cast<int>(query_tiles);
  w.n = static_cast<int>(item_end - item_begin);
  w.qt_begin = static_cast<int>(item_begin % query_tiles);
  w.h_begin = static_cast<int>(w.g * a.group + item_begin / query_tiles);
  return w;
}

/// Pᵀ of item (queries q0 .., stage's log2(e)·lse `lse2`) in place of Sᵀ in x (x[4c + e]: key
/// key0 (e < 2) or key0 + 8, query q0 + 8c + 2t + (e & 1)): exp2(scale2·Sᵀ - log2(e)·lse), 0 where
/// the query does not see the key. An item whose every (key, query) is visible skips the mask (the
/// same bits).
__device__ __forceinline__ void dkdv_probabilities(float (&x)[32], const dkdv_work& w, int window, int q0, int key0,
                                                   int t, float scale2, const float* lse2) {
  constexpr int KEYS = dkdv_wg_shape::keys, BQ = dkdv_wg_shape::query_tile;
  const int jl = w.j_last, ql = w.q_last, key1 = key0 + 8;
  const bool whole = w.first_key + KEYS - 1 == jl && jl <= q0 && q0 + BQ - 1 <= ql &&
                     (window <= 0 || w.first_key > q0 + BQ - 1 - window);
  if (whole) {
#pragma unroll
    for (int e = 0; e < 32; ++e) x[e] = exp2_approx(fmaf(x[e], scale2, -lse2[8 * (e >> 2) + 2 * t + (e & 1)]));
  } else {
#pragma unroll
    for (int e = 0; e < 32; ++e) {
      const int il = 8 * (e >> 2) + 2 * t + (e & 1);
      const int qp = q0 + il, j = (e & 2) == 0 ? key0 : key1;
      const bool visible = qp <= ql && j <= jl && j <= qp && (window <= 0 || j > qp - window);
      x[e] = visible ? exp2_approx(fmaf(x[e], scale2, -lse2[il])) : 0.f;
    }
  }
}

/// The end of a dK / dV unit: this thread's two key rows (key0, key0 + 8) of a 64 x 256 accumulator
/// (acc[4c + e]: key key0 (e < 2) or key0 + 8, column col0 + 8c + 2t + (e & 1) of rows of D
/// columns), dV (dv) or unscaled dK: with splits, float32 into the split's partials; without, added
/// to dv or dk (dK times a.scale), one rounding to bf16. Rows outside the tile or the tensors are
/// skipped.
template <int D>
__device__ __forceinline__ void store_dkdv_rows(const float (&acc)[128], bool dv, const dkdv_args<bf16>& a,
                                                const dkdv_partials& part, const dkdv_work& w, int key0, int t, int col0) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int j = half == 0 ? key0 : key0 + 8;
    const std::int64_t tok = static_cast<std::int64_t>(w.start) + j;
    if (j > w.j_last || tok < 0 || tok >= a.tokens) continue;
    if (part.splits > 1) {
      float* const row = (dv ? part.dv : part.dk) + ((w.split * a.tokens + tok) * a.kv_heads + w.g) * D + col0;
#pragma unroll
      for (int c = 0; c < 32; ++c)
        *reinterpret_cast<float2*>(row + 8 * c + 2 * t) = make_float2(acc[4 * c + 2 * half], acc[4 * c + 2 * half + 1]);
    } else {
      bf16* const row = (dv ? a.dv : a.dk) + (tok * a.kv_heads + w.g) * D + col0;
      const float f = dv ? 1.f : a.scale;
#pragma unroll
      for (int c = 0; c < 32; ++c) {
        const int col = 8 * c + 2 * t;
        const __nv_bfloat162 old = *reinterpret_cast<const __nv_bfloat162*>(row + col);
        const float x0 = acc[4 * c + 2 * half], x1 = acc[4 * c + 2 * half + 1];
        *reinterpret_cast<std::uint32_t*>(row + col) =
            pack_bf16(__fadd_rn(__low2float(old), dv ? x0 : __fmul_rn(f, x0)),
                      __fadd_rn(__high2float(old), dv ? x1 : __fmul_rn(f, x1)));
      }
    }
  }
}

/// Block x = (key tile · G + kv head) · splits + split (tiles of dkdv_wg_shape::keys = 64
/// positions, the numbering a.offsets). a.d must be 256; keys / queries: the maps of
/// a.k / a.v and a.q / a.dout.
__global__ void __launch_bounds__(dkdv_wg_shape::threads, 1)
    wgmma_dkdv_kernel(dkdv_args<bf16> a, dkdv_partials part,
                      const __grid_constant__ tma_keys keys, const __grid_constant__ tma_queries queries) {
  using shape = dkdv_wg_shape;
  constexpr int D = shape::d, KEYS = shape::keys, BQ = shape::query_tile;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* const smem = smem_raw + ((1024u - (shared_address(smem_raw) & 1023u)) & 1023u);
  unsigned char* const ks = smem;                          // sw128 [64 keys][256]
  unsigned char* const vs = ks + shape::tile_bytes;        // sw128 [64 keys][256]
  unsigned char* const qs = vs + shape::tile_bytes;        // 2 stages of sw128 [64 queries][256]
  unsigned char* const dos = qs + 2 * shape::tile_bytes;   // 2 stages of sw128 [64 queries][256]
  float* const pbuf = reinterpret_cast<float*>(dos + 2 * shape::tile_bytes);  // F32 [32][128]: Pᵀ
  float* const lse2_s = pbuf + shape::p_floats;            // F32 [2][64]: log2(e)·lse, +inf for none
  float* const delta_s = lse2_s + 2 * BQ;                  // F32 [2][64]
  // barriers: kv_full, full[2], empty[2]
  const std::uint32_t bars = shared_address(delta_s + 2 * BQ);
  const std::uint32_t kv_full = bars;
  const auto full = [&](int s) { return bars + 8u * (1 + s); };
  const auto empty = [&](int s) { return bars + 8u * (3 + s); };
  constexpr int p_ready = 1, p_free = 2;  // named barriers of the two warpgroups

  if (!find_tile(a.offsets, a.cu, a.num_seqs, static_cast<std::int64_t>(blockIdx.x) / part.splits / a.kv_heads, KEYS).valid)
    return;
  if (threadIdx.x == 0) {
    wgmma::mbarrier_init(kv_full, 1);
    for (int s = 0; s < 2; ++s) {
      wgmma::mbarrier_init(full(s), 1 + 32);  // the copy engine's thread, the 32 lanes of lse and D
      wgmma::mbarrier_init(empty(s), shape::threads / 32);
    }
    wgmma::mbarrier_init_fence();
  }
  __syncthreads();
  const int wg = static_cast<int>(threadIdx.x) >> 7, tid = static_cast<int>(threadIdx.x) & 127;
  const int lane = tid & 31;

  const dkdv_work w = find_dkdv_work(a, part, blockIdx.x);
  // Warp 0 of warpgroup 1 fills stage i % 2 with item i: the copy engine's bytes (lane 0) and
  // log2(e)·lse and D of its 64 queries (two per lane). Warpgroup 1 finishes an item last (it
  // waits for Pᵀ), so by then warpgroup 0 has usually released the stage too.
  const auto fill = [&](int i, int h, int qt) {
    const int s = i & 1;
    const int q0 = w.first_key + qt * BQ;
    if (i >= 2) wgmma::mbarrier_wait(empty(s), static_cast<std::uint32_t>(((i >> 1) - 1) & 1));
    if (lane == 0) {
      wgmma::mbarrier_arrive_expect_bytes(full(s), static_cast<std::uint32_t>(2 * shape::tile_bytes));
#pragma unroll 1
      for (int c = 0; c < D / 64; ++c) {
        wgmma::tensor_load_3d(shared_address(qs + s * shape::tile_bytes + c * BQ * 128), &queries.q_map, c * 64, h,
                              w.start + q0, full(s));
        wgmma::tensor_load_3d(shared_address(dos + s * shape::tile_bytes + c * BQ * 128), &queries.dout_map, c * 64, h,
                              w.start + q0, full(s));
      }
    }
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int il = lane + 32 * half;
      const std::int64_t tok = static_cast<std::int64_t>(w.start) + q0 + il, row = tok * a.heads + h;
      const bool real = q0 + il <= w.q_last && tok >= 0 && tok < a.tokens;
      lse2_s[s * BQ + il] = real ? __fmul_rn(a.lse[row], log2e) : INFINITY;
      delta_s[s * BQ + il] = real ? a.delta[row] : 0.f;
    }
    wgmma::mbarrier_arrive(full(s));
  };
  const auto next = [&](int& h, int& qt) {  // the item after (head h, query tile qt)
    if (++qt == w.tiles_per_head) {
      qt = 0;
      ++h;
    }
  };
  const bool filler = wg == 1 && tid < 32;
  int fill_h = w.h_begin, fill_qt = w.qt_begin;  // the next item to fill (filler only)
  if (filler) {
    if (lane == 0) {
      const int row = w.start + w.first_key, kvh = static_cast<int>(w.g);
      wgmma::mbarrier_arrive_expect_bytes(kv_full, static_cast<std::uint32_t>(2 * shape::tile_bytes));
#pragma unroll 1
      for (int c = 0; c < D / 64; ++c) {
        wgmma::tensor_load_3d(shared_address(ks + c * KEYS * 128), &keys.k_map, c * 64, kvh, row, kv_full);
        wgmma::tensor_load_3d(shared_address(vs + c * KEYS * 128), &keys.v_map, c * 64, kvh, row, kv_full);
      }
    }
    for (int i = 0; i < 2 && i < w.n; ++i) {
      fill(i, fill_h, fill_qt);
      next(fill_h, fill_qt);
    }
  }
  const int gq = lane >> 2, t = lane & 3;
  // this thread's keys: rows r0 (e = 0, 1) and r0 + 8 (e = 2, 3) of every product; positions fit
  // 32 bits (cu_seqlens is I32)
  const int r0 = (tid >> 5) * 16 + gq;
  const int key0 = w.first_key + r0;
  const int window = static_cast<int>(a.window);
  const float scale2 = a.scale * log2e;
  float acc[128];  // dV (warpgroup 0) or dK unscaled (warpgroup 1): [64 keys][256]
#pragma unroll
  for (int e = 0; e < 128; ++e) acc[e] = 0.f;
  // warpgroup 0: Sᵀ = K·Qᵀ; warpgroup 1: dPᵀ = V·dOᵀ
  const std::uint32_t a_addr = shared_address(wg == 0 ? ks : vs);
  const std::uint32_t b_addr0 = shared_address(wg == 0 ? qs : dos);
  // the N-major operand of the accumulation: dO for dV, Q for dK
  const std::uint32_t n_addr0 = shared_address(wg == 0 ? dos : qs);
  wgmma::mbarrier_wait(kv_full, 0);

  for (int i = 0, qt = w.qt_begin; i < w.n; ++i, qt = qt + 1 == w.tiles_per_head ? 0 : qt + 1) {
    const int s = i & 1;
    const std::uint32_t round = static_cast<std::uint32_t>((i >> 1) & 1);
    const int q0 = w.first_key + qt * BQ;
    const std::uint32_t stage = static_cast<std::uint32_t>(s) * static_cast<std::uint32_t>(shape::tile_bytes);

    float x[32];  // Sᵀ or dPᵀ: x[4c + e], key r0 (e < 2) or r0 + 8, query 8c + 2t + (e & 1)
    wgmma::mbarrier_wait(full(s), round);
    scores<D, KEYS, BQ>(x, a_addr, b_addr0 + stage);

    const float* const lse2 = lse2_s + s * BQ;
    const float* const dl = delta_s + s * BQ;
    if (wg == 0) {
      dkdv_probabilities(x, w, window, q0, key0, t, scale2, lse2);
      if (i >= 1) named_barrier(p_free, 256);  // warpgroup 1 has read the previous Pᵀ
#pragma unroll
      for (int e = 0; e < 32; ++e) pbuf[e * 128 + tid] = x[e];
      named_barrier_arrive(p_ready, 256);
    } else {
      named_barrier(p_ready, 256);
#pragma unroll
      for (int e = 0; e < 32; ++e) x[e] = __fmul_rn(pbuf[e * 128 + tid], x[e] - dl[8 * (e >> 2) + 2 * t + (e & 1)]);
      if (i + 1 < w.n) named_barrier_arrive(p_free, 256);
    }
    accumulate_tiles<BQ>(acc, x, n_addr0 + stage);  // Pᵀ or dSᵀ (rounded to bf16) times dO or Q
    __syncwarp();
    if (lane == 0) wgmma::mbarrier_arrive(empty(s));
    if (filler && i + 2 < w.n) {
      fill(i + 2, fill_h, fill_qt);
      next(fill_h, fill_qt);
    }
  }

  store_dkdv_rows<D>(acc, wg == 0, a, part, w, key0, t, 0);
}

// ---------------------------------------------------------------------------------------------
// launcher

/// The maps of q and dout [T, H, d] (bf16, d 256 or 512) for the wgmma dK / dV passes.
inline status make_tma_queries(const char* op, const bf16* q, const bf16* dout, std::int64_t tokens, std::int64_t heads,
                               std::int64_t d, tma_queries& out) {
  TANDEM_RETURN_IF_ERROR(encode_rows_map(op, "queries", q, tokens, heads, d, dkdv_wg_shape::query_tile, out.q_map));
  return encode_rows_map(op, "output gradients", dout, tokens, heads, d, dkdv_wg_shape::query_tile, out.dout_map);
}

/// key_tiles tiles of 64 positions (numbering a.offsets) x kv heads x part.splits blocks, then
/// (splits > 1) the reduction of the partials; a.d 256, bf16, 16-byte aligned rows; keys: the maps
/// of a.k and a.v (make_tma_keys, which the dQ pass takes too).
inline status launch_wgmma_dkdv(cudaStream_t stream, const char* op, std::int64_t key_tiles, const dkdv_args<bf16>& a,
                                const dkdv_partials& part, const tma_keys& keys) {
  using shape = dkdv_wg_shape;
  const std::int64_t blocks = key_tiles * a.kv_heads * part.splits;
  if (blocks > 0x7fffffffLL || key_tiles * a.kv_heads > 0x7fffffffLL)
    return {status_code::unsupported, std::string(op) + ": too many tokens or kv heads for one CUDA grid"};
  tma_queries queries{};
  TANDEM_RETURN_IF_ERROR(make_tma_queries(op, a.q, a.dout, a.tokens, a.heads, a.d, queries));
  constexpr auto kernel = &wgmma_dkdv_kernel;
  TANDEM_RETURN_IF_ERROR(allow_shared_memory<kernel>(shape::smem_bytes));
  kernel<<<static_cast<unsigned>(blocks), shape::threads, shape::smem_bytes, stream>>>(a, part, keys, queries);
  status st = launch_status(op, "wgmma_dkdv_kernel");
  if (!st.ok() || part.splits == 1) return st;
  dkdv_reduce_kernel<256, shape::keys>
      <<<dim3(static_cast<unsigned>(key_tiles * a.kv_heads), shape::keys / 8), 256, 0, stream>>>(a, part);
  return launch_status(op, "dkdv_reduce_kernel");
}

}  // namespace tandem::gpu::ops::cuda::attn::mma
