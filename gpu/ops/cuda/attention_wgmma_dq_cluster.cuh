// The dQ pass of the bfloat16 attention backward at head dim 512 on Hopper's warpgroup tensor
// cores, by clusters of two blocks (sm_90a; nvcc only; private to attention.cu). It mirrors the
// clustered dK / dV pass (attention_wgmma_dkdv_cluster.cuh): a cluster takes the 64 query rows of
// one tile of mma_tiling(H, G, 64) (the GQA heads of one kv head times consecutive positions), and
// block h of the cluster owns the column half h (columns 256h .. 256h + 255): it keeps Q[:, h] and
// dO[:, h] of the rows, streams K[:, h] and V[:, h] of each key tile of 64 positions through a
// two-stage ring filled by the bulk tensor copy engine, and accumulates dQ[:, h]. With the rows as
// M = 64:
//
//   warpgroup 0:  S_h  = Q_h·K_hᵀ    (SS, m64n64k16 x 16)   S  = S_h + S_(1-h)    P = exp2(scaling·log2(e)·S - log2(e)·lse)
//   warpgroup 1:  dP_h = dO_h·V_hᵀ   (SS, m64n64k16 x 16)   dP = dP_h + dP_(1-h)  dS = P ⊙ (dP - D)
//   warpgroup w:  dQ[:, h][128w ..] += dS·K_h[:, 128w ..]   (RS, m64n128k16 x 4)   dq = scaling · dQ
//
// The halves travel as in the dK / dV pass (float32 in accumulator order into the peer's s_recv
// and dp_recv, counted on its s_full and dp_full). Warpgroup 0 writes P over the received S half
// (named barrier p_ready), warpgroup 1 reads it, computes dS and writes it over the received dP
// half (ds_ready); warpgroup 0 reads dS and its warps arrive on the peer's recv_free. A row's dQ sums
// its key tiles in position order: deterministic, no atomics. A key tile every row of the cluster
// sees whole skips the mask (the same bits). Keys and values must be finite (a masked P of 0 makes
// a dS of 0).
//
// One block, key tile i (s = i % 2; both blocks of a cluster walk the same tiles):
//
//   warpgroup 0: wait kv_full[s]; S_h = Q_h·K_hᵀ; [i >= 1: wait recv_free (i - 1)]; send S_h -> peer
//                s_full; wait s_full (i); S = S_h + received; [thread 0: arm s_full (i + 1)]; mask,
//                P -> over the received half; arrive p_ready; sync ds_ready; dS (shared) -> bf16;
//                [i + 1 < n: each warp arrives on the peer's recv_free]; dQ[:, left] += dS·K_h[:, left];
//                release kv_empty[s]
//   warpgroup 1: wait kv_full[s]; dP_h = dO_h·V_hᵀ; [i >= 1: wait recv_free (i - 1)]; send dP_h ->
//                peer dp_full; wait dp_full (i); dP = dP_h + received; [thread 0: arm dp_full
//                (i + 1)]; sync p_ready; dS from P -> over the received half; arrive ds_ready;
//                dQ[:, right] += dS·K_h[:, right]; release kv_empty[s]; warp 4: fill(i + 2)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "gpu/ops/cuda/attention_wgmma_dkdv_cluster.cuh"
#include "gpu/ops/cuda/cluster.cuh"

namespace tandem::gpu::ops::cuda::attn::mma {

/// The bulk tensor copy maps of k and v [T, G, 512] for the head-dim-512 dQ pass: boxes of (64
/// columns, 1 head, 64 positions), 128-byte swizzle.
struct tma_dq_maps {
  CUtensorMap k_map, v_map;
};

struct dq_cluster_shape {
  static constexpr int d = 512;
  static constexpr int half = d / 2;  // columns of a block
  static constexpr int block_rows = 64;
  static constexpr int key_tile = 64;
  static constexpr int threads = 256;  // two warpgroups, up to 255 registers a thread
  static constexpr std::size_t tile_bytes = static_cast<std::size_t>(64) * half * 2;  // Q_h, dO_h, a K_h or a V_h stage
  static constexpr std::size_t half_bytes = 32 * 128 * sizeof(float);                 // a received S or dP half
  static constexpr std::size_t barrier_bytes = 7 * sizeof(std::uint64_t);
  static constexpr std::size_t smem_bytes = 1024 /* alignment */ + 6 * tile_bytes + 2 * half_bytes +
                                            block_rows * (sizeof(std::int64_t) + sizeof(std::int32_t)) + barrier_bytes;
  static_assert(smem_bytes <= 232448, "the shared memory of one Hopper block");
  static_assert(half_bytes == dkdv_cluster_shape::half_bytes, "the halves that exchange_halves sends");
};

/// Cluster (x / 2, y): the query tile numbered gridDim.x / 2 - 1 - x / 2 of layout (rows of
/// mma_tiling(H, G, 64)), kv head chunk y; block rank h its column half. Uses a.q, a.dout,
/// a.lse_in, a.delta_in, a.dq, a.accumulate_dq, a.scale, a.window; a.d must be 512.
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(dq_cluster_shape::threads, 1)
    wgmma_dq_cluster_kernel(query_args<bf16> a, query_layout layout, const __grid_constant__ tma_dq_maps maps) {
  using shape = dq_cluster_shape;
  constexpr int D = shape::d, HALF = shape::half, BM = shape::block_rows, BN = shape::key_tile;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* const smem = smem_raw + ((1024u - (shared_address(smem_raw) & 1023u)) & 1023u);
  unsigned char* const qs = smem;                          // sw128 [64 rows][256]: Q_h (zeros: no row)
  unsigned char* const dos = qs + shape::tile_bytes;       // sw128 [64 rows][256]: dO_h
  unsigned char* const ks = dos + shape::tile_bytes;       // 2 stages of sw128 [64 keys][256]: K_h
  unsigned char* const vs = ks + 2 * shape::tile_bytes;    // 2 stages of sw128 [64 keys][256]: V_h
  float* const s_recv = reinterpret_cast<float*>(vs + 2 * shape::tile_bytes);  // F32 [8][128][4]: the peer's S half, then P
  float* const dp_recv = s_recv + shape::half_bytes / sizeof(float);           // F32 [8][128][4]: the peer's dP half, then dS
  std::int64_t* const qrow_s = reinterpret_cast<std::int64_t*>(dp_recv + shape::half_bytes / sizeof(float));  // [64]
  std::int32_t* const pos_s = reinterpret_cast<std::int32_t*>(qrow_s + BM);                                  // [64]
  // barriers: kv_full[2], kv_empty[2], s_full, dp_full, recv_free
  const std::uint32_t bars = shared_address(pos_s + BM);
  const std::uint32_t s_full = bars + 32u, dp_full = bars + 40u, recv_free = bars + 48u;
  const auto kv_full = [&](int s) { return bars + 8u * s; };
  const auto kv_empty = [&](int s) { return bars + 8u * (2 + s); };
  constexpr int p_ready = 1, ds_ready = 2;  // named barriers of the two warpgroups

  const std::int64_t clusters = static_cast<std::int64_t>(gridDim.x) >> 1;
  const query_tile tile = find_query_tile_at(layout, clusters - 1 - (static_cast<std::int64_t>(blockIdx.x) >> 1), blockIdx.y);
  // both blocks of a cluster share the tile, so both return here or neither
  if (!tile.place.valid) return;
  const std::uint32_t h = cluster::rank(), peer = h ^ 1u;
  const int col0 = static_cast<int>(h) * HALF;  // the block's first column
  for (int l = static_cast<int>(threadIdx.x); l < BM; l += shape::threads) {
    std::int64_t qrow = -1, pos = -1;
    query_row(layout, tile, l, qrow, pos);
    qrow_s[l] = qrow;
    pos_s[l] = static_cast<std::int32_t>(pos);  // positions fit 32 bits (cu_seqlens is I32)
  }
  const int wg = static_cast<int>(threadIdx.x) >> 7, tid = static_cast<int>(threadIdx.x) & 127;
  const int lane = tid & 31;
  if (threadIdx.x == 0) {
    for (int s = 0; s < 2; ++s) {
      wgmma::mbarrier_init(kv_full(s), 1);                    // the copy engine's thread (and the bytes)
      wgmma::mbarrier_init(kv_empty(s), shape::threads / 32);
    }
    half_exchange::init(s_full, dp_full, recv_free);  // recv_free: the peer's warpgroup 0
    wgmma::mbarrier_init_fence();
  }
  __syncthreads();
  half_exchange::open(wg, tid, s_full, dp_full);

  std::int32_t pmin, pmax;  // the least and greatest position of a row (every warp the same)
  position_range(pos_s, BM, pmin, pmax);
  // pmax < 0: no row. Uniform over the cluster (the same tile), so both blocks skip to the end.
  const int kmin = pmax < 0 ? 0 : static_cast<int>(first_visible(pmin, a.window));
  const int kt_first = kmin / BN, tiles = pmax < 0 ? 0 : pmax / BN - kt_first + 1;
  const int g = static_cast<int>(tile.g), key_row0 = static_cast<int>(tile.place.start) + kt_first * BN;
  const auto fill = [&](int i) {  // K_h and V_h of key tile i into stage i % 2 (one thread)
    const int s = i & 1;
    if (i >= 2) wgmma::mbarrier_wait(kv_empty(s), static_cast<std::uint32_t>(((i >> 1) - 1) & 1));
    wgmma::mbarrier_arrive_expect_bytes(kv_full(s), static_cast<std::uint32_t>(2 * shape::tile_bytes));
#pragma unroll 1
    for (int c = 0; c < HALF / 64; ++c) {
      wgmma::tensor_load_3d(shared_address(ks + s * shape::tile_bytes + c * BN * 128), &maps.k_map, col0 + c * 64, g,
                            key_row0 + i * BN, kv_full(s));
      wgmma::tensor_load_3d(shared_address(vs + s * shape::tile_bytes + c * BN * 128), &maps.v_map, col0 + c * 64, g,
                            key_row0 + i * BN, kv_full(s));
    }
  };
  const bool filler = threadIdx.x == 128;  // warp 4's lane 0
  if (filler)
    for (int i = 0; i < 2 && i < tiles; ++i) fill(i);
  {  // Q_h and dO_h of the rows, by every thread
    const auto offset_of = [&](int l) { return qrow_s[l] >= 0 ? qrow_s[l] * D + col0 : std::int64_t{-1}; };
    load_sw128<HALF, BM, shape::threads>(qs, a.q, static_cast<int>(threadIdx.x), offset_of);
    load_sw128<HALF, BM, shape::threads>(dos, a.dout, static_cast<int>(threadIdx.x), offset_of);
    cp_async_commit();
    cp_async_wait<0>();
    wgmma::fence_proxy_async();  // publish them to the tensor cores
    __syncthreads();
  }

  const int gq = lane >> 2, t = lane & 3;
  const int row0 = (tid >> 5) * 16 + gq;  // this thread's rows: row0 (e = 0, 1) and row0 + 8 (e = 2, 3)
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
  const int full_first = pmax < 0 ? 0 : static_cast<int>(first_visible(pmax, a.window));
  const float scale2 = a.scale * log2e;

  float acc[64];  // dQ[:, h] unscaled, this warpgroup's 128 columns: acc[4i + e], row row0 (e < 2) or row0 + 8, column 8i + 2t + (e & 1)
#pragma unroll
  for (int e = 0; e < 64; ++e) acc[e] = 0.f;
  // warpgroup 0: S_h = Q_h·K_hᵀ; warpgroup 1: dP_h = dO_h·V_hᵀ
  const std::uint32_t a_addr = shared_address(wg == 0 ? qs : dos);
  const std::uint32_t b_addr0 = shared_address(wg == 0 ? ks : vs);
  // the N-major operand of the accumulation: K_h's column blocks 2w, 2w + 1
  const std::uint32_t k_cols0 = shared_address(ks) + static_cast<std::uint32_t>(wg * 2 * BN * 128);
  const half_exchange ex = half_exchange::of(wg, peer, s_recv, dp_recv, s_full, dp_full, recv_free);
  float4* const s4 = reinterpret_cast<float4*>(s_recv);
  float4* const dp4 = reinterpret_cast<float4*>(dp_recv);

#pragma unroll 1
  for (int i = 0; i < tiles; ++i) {
    const int s = i & 1, j0 = (kt_first + i) * BN;
    const std::uint32_t stage = static_cast<std::uint32_t>(s) * static_cast<std::uint32_t>(shape::tile_bytes);

    float x[32];  // S or dP: x[4c + e], row row0 (e < 2) or row0 + 8, key j0 + 8c + 2t + (e & 1)
    wgmma::mbarrier_wait(kv_full(s), static_cast<std::uint32_t>((i >> 1) & 1));
    scores<HALF, BM, BN>(x, a_addr, b_addr0 + stage);

    exchange_halves(x, i, tiles, tid, ex);

    if (wg == 0) {  // P, over the received S half
      if (j0 + BN - 1 <= pmin && j0 >= full_first) {  // uniform over the cluster
#pragma unroll
        for (int e = 0; e < 32; ++e) x[e] = exp2_approx(fmaf(x[e], scale2, (e & 2) == 0 ? -lse20 : -lse21));
      } else {
#pragma unroll
        for (int e = 0; e < 32; ++e) {
          const int j = j0 + (e >> 2) * 8 + 2 * t + (e & 1);
          const bool visible = (e & 2) == 0 ? (pos0 >= 0 && j >= first0 && j <= pos0) : (pos1 >= 0 && j >= first1 && j <= pos1);
          x[e] = visible ? exp2_approx(fmaf(x[e], scale2, (e & 2) == 0 ? -lse20 : -lse21)) : 0.f;
        }
      }
#pragma unroll
      for (int c = 0; c < 8; ++c) s4[c * 128 + tid] = make_float4(x[4 * c], x[4 * c + 1], x[4 * c + 2], x[4 * c + 3]);
      named_barrier_arrive(p_ready, 256);
      named_barrier(ds_ready, 256);
#pragma unroll
      for (int c = 0; c < 8; ++c) {
        const float4 r = dp4[c * 128 + tid];
        x[4 * c] = r.x;
        x[4 * c + 1] = r.y;
        x[4 * c + 2] = r.z;
        x[4 * c + 3] = r.w;
      }
      __syncwarp();
      if (lane == 0 && i + 1 < tiles) cluster::arrive_remote(ex.peer_recv_free);  // both received halves read
    } else {  // dS = P ⊙ (dP - D), over the received dP half
      named_barrier(p_ready, 256);
#pragma unroll
      for (int c = 0; c < 8; ++c) {
        const float4 p = s4[c * 128 + tid];
        const float pe[4] = {p.x, p.y, p.z, p.w};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int k = 4 * c + e;
          x[k] = __fmul_rn(pe[e], x[k] - ((e & 2) == 0 ? delta0 : delta1));
        }
      }
#pragma unroll
      for (int c = 0; c < 8; ++c) dp4[c * 128 + tid] = make_float4(x[4 * c], x[4 * c + 1], x[4 * c + 2], x[4 * c + 3]);
      named_barrier_arrive(ds_ready, 256);
    }
    accumulate_tiles<BN>(acc, x, k_cols0 + stage);  // dS (rounded to bf16) times this warpgroup's K columns
    __syncwarp();
    if (lane == 0) wgmma::mbarrier_arrive(kv_empty(s));
    if (filler && i + 2 < tiles) fill(i + 2);
  }

  // dq row = scaling · acc (+ the old row), one rounding to bf16; no row: nothing written
  const std::int64_t qrow0 = qrow_s[row0], qrow1 = qrow_s[row0 + 8];
  const int cols = col0 + wg * (HALF / 2);  // this warpgroup's first column
  bf16* const out0 = a.dq + (qrow0 >= 0 ? qrow0 : 0) * D + cols;
  bf16* const out1 = a.dq + (qrow1 >= 0 ? qrow1 : 0) * D + cols;
  if (!a.accumulate_dq) {  // packed, a quad transposes the words, 16-byte stores
#pragma unroll
    for (int k = 0; k < 4; ++k) {
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
  } else {
    const auto value = [&](const bf16* p, float x0, float x1) {
      const __nv_bfloat162 old = *reinterpret_cast<const __nv_bfloat162*>(p);
      return pack_bf16(__fadd_rn(__low2float(old), __fmul_rn(a.scale, x0)), __fadd_rn(__high2float(old), __fmul_rn(a.scale, x1)));
    };
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const int col = 8 * i + 2 * t;
      const std::uint32_t v0 = value(out0 + col, acc[4 * i], acc[4 * i + 1]);
      const std::uint32_t v1 = value(out1 + col, acc[4 * i + 2], acc[4 * i + 3]);
      if (qrow0 >= 0) *reinterpret_cast<std::uint32_t*>(out0 + col) = v0;
      if (qrow1 >= 0) *reinterpret_cast<std::uint32_t*>(out1 + col) = v1;
    }
  }
  cluster::sync();  // the peer no longer touches this block's shared memory
}

// ---------------------------------------------------------------------------------------------
// launcher

/// Grid (2 x query tiles of mma_tiling(H, G, 64), kv heads x head chunks): clusters of two blocks
/// along x; a.d 512, bf16, 16-byte aligned rows; k, v [T, G, 512] of `keys`.
inline status launch_wgmma_dq_cluster(cudaStream_t stream, const char* op, dim3 grid, const query_args<bf16>& a,
                                      const query_layout& layout, const packed_keys<bf16>& keys) {
  using shape = dq_cluster_shape;
  if (a.d != shape::d || keys.d != shape::d)
    return {status_code::unsupported, std::string(op) + ": the clustered dq kernel runs head dim 512 only"};
  if (grid.x > 0x3fffffffu)
    return {status_code::unsupported, std::string(op) + ": too many tokens for one CUDA grid"};
  tma_dq_maps maps{};
  TANDEM_RETURN_IF_ERROR(encode_rows_map(op, "keys", keys.k, keys.tokens, keys.kv_heads, keys.d, shape::key_tile, maps.k_map));
  TANDEM_RETURN_IF_ERROR(encode_rows_map(op, "values", keys.v, keys.tokens, keys.kv_heads, keys.d, shape::key_tile, maps.v_map));
  constexpr auto kernel = &wgmma_dq_cluster_kernel;
  TANDEM_RETURN_IF_ERROR(allow_shared_memory<kernel>(shape::smem_bytes));
  kernel<<<dim3(2 * grid.x, grid.y), shape::threads, shape::smem_bytes, stream>>>(a, layout, maps);
  return launch_status(op, "wgmma_dq_cluster_kernel");
}

}  // namespace tandem::gpu::ops::cuda::attn::mma
