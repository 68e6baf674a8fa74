// The dK / dV pass of the bfloat16 attention backward at head dim 512 on Hopper's warpgroup tensor
// cores, by clusters of two blocks (sm_90a; nvcc only; private to attention.cu). At d 512 one block
// cannot hold what the d 256 kernel (attention_wgmma_dkdv.cuh) holds: K and V of 64 keys and two
// stages of Q and dO are 384 KB, and a 64 x 512 float32 accumulator is 256 registers a thread. So
// a cluster of two blocks takes a unit of work (64 key positions of one sequence and kv head, a
// range of items), and block h of the cluster owns the column half h (columns 256h .. 256h + 255):
// it keeps K[:, h] and V[:, h], streams Q[:, h] and dO[:, h] of each item, and accumulates dV[:, h]
// and dK[:, h]. The products that contract over all 512 columns are split between the blocks and
// their halves added:
//
//   block h:  Sᵀ_h  = K_h·Q_hᵀ    (SS, m64n64k16 x 16)    Sᵀ  = Sᵀ_h + Sᵀ_(1-h)   (the same bits in
//             dPᵀ_h = V_h·dO_hᵀ   (SS, m64n64k16 x 16)    dPᵀ = dPᵀ_h + dPᵀ_(1-h)  both blocks: a + b = b + a)
//             Pᵀ  = exp2(scaling·log2(e)·Sᵀ - log2(e)·lse)      dSᵀ = Pᵀ ⊙ (dPᵀ - D)
//             dV[:, h] += Pᵀ·dO_h   (RS, m64n256k16 x 4)      dK[:, h] += dSᵀ·Q_h   (RS, m64n256k16 x 4)
//
// so no product is computed twice. Each block sends its halves Sᵀ_h (warpgroup 0) and dPᵀ_h
// (warpgroup 1) to its peer, float32 in accumulator order (element 4c + e of thread t at float4
// [c][t], component e), as stores into the peer's shared memory that count bytes on the peer's
// mbarriers s_full and dp_full; a block adds the peer's half it received to its own. Warpgroup 0
// then writes Pᵀ over the received Sᵀ half for warpgroup 1 (named barrier p_ready), and once
// warpgroup 1 has read Pᵀ and the received dPᵀ half its warps arrive on the peer's recv_free: the
// peer may send the next item's halves. Every (key, query) pair is summed in item order, then query
// order inside an item, so the result is deterministic; splits and their reduction are the d 256
// kernel's (dkdv_partials, dkdv_reduce_kernel).
//
// One block, one item i (s = i % 2; both blocks of a cluster walk the same items):
//
//   warpgroup 0: wait full[s]; Sᵀ_h = K_h·Q_hᵀ; [i >= 1: wait recv_free (i - 1)]; send Sᵀ_h -> peer
//                s_full; wait s_full (i); Sᵀ = Sᵀ_h + received; [thread 0: arm s_full (i + 1)]; mask,
//                Pᵀ; Pᵀ -> over the received half; arrive p_ready; dV += Pᵀ·dO_h; release empty[s]
//   warpgroup 1: wait full[s]; dPᵀ_h = V_h·dO_hᵀ; [i >= 1: wait recv_free (i - 1)]; send dPᵀ_h ->
//                peer dp_full; wait dp_full (i); dPᵀ = dPᵀ_h + received; sync p_ready; dSᵀ from Pᵀ;
//                [thread 0: arm dp_full (i + 1)]; [i + 1 < n: each warp arrives on the peer's
//                recv_free]; dK += dSᵀ·Q_h; release empty[s]; warp 4: fill(i + 2)
//
// No phase of a barrier can complete twice before its waiters pass it: the peer sends item i + 1
// only after this block's warpgroup 1 has read item i, which follows warpgroup 0's read of it
// (p_ready) and thread 0's arming of the next phase. The fill of the ring, the masks and the
// epilogue are the d 256 kernel's, over the block's column half.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "gpu/ops/cuda/attention_wgmma_dkdv.cuh"
#include "gpu/ops/cuda/cluster.cuh"

namespace tandem::gpu::ops::cuda::attn::mma {

/// The bulk tensor copy maps of the head-dim-512 dK / dV pass: k, v [T, G, 512] and q, dout
/// [T, H, 512], boxes of (64 columns, 1 head, 64 positions), 128-byte swizzle.
struct tma_dkdv_maps {
  CUtensorMap k_map, v_map, q_map, dout_map;
};

struct dkdv_cluster_shape {
  static constexpr int d = 512;
  static constexpr int half = d / 2;      // columns of a block
  static constexpr int keys = dkdv_wg_shape::keys;
  static constexpr int query_tile = dkdv_wg_shape::query_tile;
  static constexpr int threads = 256;     // two warpgroups, up to 255 registers a thread
  static constexpr std::size_t tile_bytes = static_cast<std::size_t>(keys) * half * 2;  // K_h, V_h, a Q_h or a dO_h stage
  static constexpr std::size_t half_bytes = 32 * 128 * sizeof(float);                   // a received Sᵀ or dPᵀ half
  static constexpr std::size_t barrier_bytes = 8 * sizeof(std::uint64_t);
  static constexpr std::size_t smem_bytes = 1024 /* alignment */ + 6 * tile_bytes + 2 * half_bytes +
                                            2 * 2 * query_tile * sizeof(float) + barrier_bytes;
  static_assert(tile_bytes == dkdv_wg_shape::tile_bytes, "a block's half has the d 256 kernel's tiles");
  static_assert(smem_bytes <= 232448, "the shared memory of one Hopper block");
};

/// Where a warpgroup's half of the clustered passes' exchange goes and comes from. Each block has
/// two receiving buffers (float4 [8][128], the peer's Sᵀ / S half and its dPᵀ / dP half) and three
/// barriers: s_full and dp_full count the bytes of the peer's half (armed by the receiving
/// warpgroup's thread 0), recv_free the peer's four warps of the warpgroup that reads both
/// received halves last (so this block may send the next item's).
struct half_exchange {
  std::uint32_t send_to;         // the peer's buffer for this warpgroup's half
  std::uint32_t send_bar;        // the peer's barrier that counts it
  std::uint32_t recv_free;       // this block's: the peer has read what this block sent
  std::uint32_t peer_recv_free;  // the peer's: this block has read what the peer sent
  std::uint32_t recv_full;       // this block's: the peer's half has landed in recv
  float4* recv;                  // this warpgroup's receiving buffer

  /// Warpgroup wg's (0: the Sᵀ / S half, 1: the dPᵀ / dP half) of block rank `peer` ^ 1.
  __device__ static half_exchange of(int wg, std::uint32_t peer, float* s_recv, float* dp_recv, std::uint32_t s_full,
                                     std::uint32_t dp_full, std::uint32_t recv_free) {
    float* const recv = wg == 0 ? s_recv : dp_recv;
    return {cluster::peer_address(shared_address(recv), peer), cluster::peer_address(wg == 0 ? s_full : dp_full, peer),
            recv_free, cluster::peer_address(recv_free, peer), wg == 0 ? s_full : dp_full, reinterpret_cast<float4*>(recv)};
  }

  /// The three barriers, by thread 0 of the block before its mbarrier_init_fence.
  __device__ static void init(std::uint32_t s_full, std::uint32_t dp_full, std::uint32_t recv_free) {
    wgmma::mbarrier_init(s_full, 1);     // warpgroup 0's thread 0 arms it, the peer's bytes complete it
    wgmma::mbarrier_init(dp_full, 1);    // warpgroup 1's thread 0 arms it, the peer's bytes complete it
    wgmma::mbarrier_init(recv_free, 4);  // the peer's warpgroup that reads last, one arrival a warp
  }

  /// After the block's barriers are initialised (and a __syncthreads): each warpgroup's thread 0
  /// arms its full barrier for item 0, then the cluster meets, so the peer's barriers exist before
  /// this block sends to them.
  __device__ static void open(int wg, int tid, std::uint32_t s_full, std::uint32_t dp_full) {
    constexpr auto bytes = static_cast<std::uint32_t>(dkdv_cluster_shape::half_bytes);
    if (tid == 0) cluster::arrive_expect_bytes(wg == 0 ? s_full : dp_full, bytes);
    cluster::sync();
  }
};

/// The exchange of halves of the clustered passes, for item i of n: this thread's 32 floats x (its
/// part of an m64n64 product over the block's column half) go to the peer's receiving buffer
/// (float4 [8][128] in accumulator order: x[4c ..] of thread tid at [c][tid]), counted on the
/// peer's barrier, once the peer has read the last item's (recv_free, phase i - 1); then, once the
/// peer's half has landed in ex.recv (recv_full, phase i), x += it, element by element (x + r here,
/// r + x in the peer: the same bits). Thread 0 of the warpgroup arms recv_full for item i + 1 (the
/// peer sends that only after this block's reads of item i: see the kernels' protocol).
__device__ __forceinline__ void exchange_halves(float (&x)[32], int i, int n, int tid, const half_exchange& ex) {
  const std::uint32_t parity = static_cast<std::uint32_t>(i & 1);
  if (i >= 1) cluster::wait(ex.recv_free, parity ^ 1u);
#pragma unroll
  for (int c = 0; c < 8; ++c)
    cluster::store_counted(ex.send_to + static_cast<std::uint32_t>((c * 128 + tid) * 16), x[4 * c], x[4 * c + 1],
                           x[4 * c + 2], x[4 * c + 3], ex.send_bar);
  cluster::wait(ex.recv_full, parity);
#pragma unroll
  for (int c = 0; c < 8; ++c) {
    const float4 r = ex.recv[c * 128 + tid];
    x[4 * c] = __fadd_rn(x[4 * c], r.x);
    x[4 * c + 1] = __fadd_rn(x[4 * c + 1], r.y);
    x[4 * c + 2] = __fadd_rn(x[4 * c + 2], r.z);
    x[4 * c + 3] = __fadd_rn(x[4 * c + 3], r.w);
  }
  if (tid == 0 && i + 1 < n) cluster::arrive_expect_bytes(ex.recv_full, static_cast<std::uint32_t>(dkdv_cluster_shape::half_bytes));
}

/// Cluster x / 2 = (key tile · G + kv head) · splits + split (64-key tiles, numbering a.offsets),
/// block rank h its column half. a.d must be 512.
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(dkdv_cluster_shape::threads, 1)
    wgmma_dkdv_cluster_kernel(dkdv_args<bf16> a, dkdv_partials part, const __grid_constant__ tma_dkdv_maps maps) {
  using shape = dkdv_cluster_shape;
  constexpr int D = shape::d, HALF = shape::half, KEYS = shape::keys, BQ = shape::query_tile;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* const smem = smem_raw + ((1024u - (shared_address(smem_raw) & 1023u)) & 1023u);
  unsigned char* const ks = smem;                          // sw128 [64 keys][256]: K_h
  unsigned char* const vs = ks + shape::tile_bytes;        // sw128 [64 keys][256]: V_h
  unsigned char* const qs = vs + shape::tile_bytes;        // 2 stages of sw128 [64 queries][256]: Q_h
  unsigned char* const dos = qs + 2 * shape::tile_bytes;   // 2 stages of sw128 [64 queries][256]: dO_h
  float* const s_recv = reinterpret_cast<float*>(dos + 2 * shape::tile_bytes);  // F32 [8][128][4]: the peer's Sᵀ half, then Pᵀ
  float* const dp_recv = s_recv + shape::half_bytes / sizeof(float);            // F32 [8][128][4]: the peer's dPᵀ half
  float* const lse2_s = dp_recv + shape::half_bytes / sizeof(float);            // F32 [2][64]: log2(e)·lse, +inf for none
  float* const delta_s = lse2_s + 2 * BQ;                                       // F32 [2][64]
  // barriers: kv_full, full[2], empty[2], s_full, dp_full, recv_free
  const std::uint32_t bars = shared_address(delta_s + 2 * BQ);
  const std::uint32_t kv_full = bars, s_full = bars + 40u, dp_full = bars + 48u, recv_free = bars + 56u;
  const auto full = [&](int s) { return bars + 8u * (1 + s); };
  const auto empty = [&](int s) { return bars + 8u * (3 + s); };
  constexpr int p_ready = 1;  // named barrier of the two warpgroups

  const std::int64_t unit = static_cast<std::int64_t>(blockIdx.x) >> 1;
  // both blocks of a cluster share the unit, so both return here or neither
  if (!find_tile(a.offsets, a.cu, a.num_seqs, unit / part.splits / a.kv_heads, KEYS).valid) return;
  const std::uint32_t h = cluster::rank(), peer = h ^ 1u;
  const int wg = static_cast<int>(threadIdx.x) >> 7, tid = static_cast<int>(threadIdx.x) & 127;
  const int lane = tid & 31;
  if (threadIdx.x == 0) {
    wgmma::mbarrier_init(kv_full, 1);
    for (int s = 0; s < 2; ++s) {
      wgmma::mbarrier_init(full(s), 1 + 32);  // the copy engine's thread, the 32 lanes of lse and D
      wgmma::mbarrier_init(empty(s), shape::threads / 32);
    }
    half_exchange::init(s_full, dp_full, recv_free);  // recv_free: the peer's warpgroup 1
    wgmma::mbarrier_init_fence();
  }
  __syncthreads();
  half_exchange::open(wg, tid, s_full, dp_full);

  const dkdv_work w = find_dkdv_work(a, part, unit);
  const int col0 = static_cast<int>(h) * HALF;  // the block's first column
  const auto fill = [&](int i, int head, int qt) {
    const int s = i & 1;
    const int q0 = w.first_key + qt * BQ;
    if (i >= 2) wgmma::mbarrier_wait(empty(s), static_cast<std::uint32_t>(((i >> 1) - 1) & 1));
    if (lane == 0) {
      wgmma::mbarrier_arrive_expect_bytes(full(s), static_cast<std::uint32_t>(2 * shape::tile_bytes));
#pragma unroll 1
      for (int c = 0; c < HALF / 64; ++c) {
        wgmma::tensor_load_3d(shared_address(qs + s * shape::tile_bytes + c * BQ * 128), &maps.q_map, col0 + c * 64, head,
                              w.start + q0, full(s));
        wgmma::tensor_load_3d(shared_address(dos + s * shape::tile_bytes + c * BQ * 128), &maps.dout_map, col0 + c * 64,
                              head, w.start + q0, full(s));
      }
    }
#pragma unroll
    for (int part_ = 0; part_ < 2; ++part_) {
      const int il = lane + 32 * part_;
      const std::int64_t tok = static_cast<std::int64_t>(w.start) + q0 + il, row = tok * a.heads + head;
      const bool real = q0 + il <= w.q_last && tok >= 0 && tok < a.tokens;
      lse2_s[s * BQ + il] = real ? __fmul_rn(a.lse[row], log2e) : INFINITY;
      delta_s[s * BQ + il] = real ? a.delta[row] : 0.f;
    }
    wgmma::mbarrier_arrive(full(s));
  };
  const auto next = [&](int& head, int& qt) {  // the item after (head, query tile qt)
    if (++qt == w.tiles_per_head) {
      qt = 0;
      ++head;
    }
  };
  const bool filler = wg == 1 && tid < 32;
  int fill_h = w.h_begin, fill_qt = w.qt_begin;  // the next item to fill (filler only)
  if (filler) {
    if (lane == 0) {
      const int row = w.start + w.first_key, kvh = static_cast<int>(w.g);
      wgmma::mbarrier_arrive_expect_bytes(kv_full, static_cast<std::uint32_t>(2 * shape::tile_bytes));
#pragma unroll 1
      for (int c = 0; c < HALF / 64; ++c) {
        wgmma::tensor_load_3d(shared_address(ks + c * KEYS * 128), &maps.k_map, col0 + c * 64, kvh, row, kv_full);
        wgmma::tensor_load_3d(shared_address(vs + c * KEYS * 128), &maps.v_map, col0 + c * 64, kvh, row, kv_full);
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
  float acc[128];  // dV[:, h] (warpgroup 0) or dK[:, h] unscaled (warpgroup 1): [64 keys][256]
#pragma unroll
  for (int e = 0; e < 128; ++e) acc[e] = 0.f;
  // warpgroup 0: Sᵀ_h = K_h·Q_hᵀ; warpgroup 1: dPᵀ_h = V_h·dO_hᵀ
  const std::uint32_t a_addr = shared_address(wg == 0 ? ks : vs);
  const std::uint32_t b_addr0 = shared_address(wg == 0 ? qs : dos);
  // the N-major operand of the accumulation: dO_h for dV, Q_h for dK
  const std::uint32_t n_addr0 = shared_address(wg == 0 ? dos : qs);
  const half_exchange ex = half_exchange::of(wg, peer, s_recv, dp_recv, s_full, dp_full, recv_free);
  const float4* const p4 = reinterpret_cast<const float4*>(s_recv);
  wgmma::mbarrier_wait(kv_full, 0);

  for (int i = 0, qt = w.qt_begin; i < w.n; ++i, qt = qt + 1 == w.tiles_per_head ? 0 : qt + 1) {
    const int s = i & 1;
    const std::uint32_t round = static_cast<std::uint32_t>((i >> 1) & 1);
    const int q0 = w.first_key + qt * BQ;
    const std::uint32_t stage = static_cast<std::uint32_t>(s) * static_cast<std::uint32_t>(shape::tile_bytes);

    float x[32];  // Sᵀ or dPᵀ: x[4c + e], key r0 (e < 2) or r0 + 8, query 8c + 2t + (e & 1)
    wgmma::mbarrier_wait(full(s), round);
    scores<HALF, KEYS, BQ>(x, a_addr, b_addr0 + stage);

    exchange_halves(x, i, w.n, tid, ex);

    const float* const lse2 = lse2_s + s * BQ;
    const float* const dl = delta_s + s * BQ;
    if (wg == 0) {
      dkdv_probabilities(x, w, window, q0, key0, t, scale2, lse2);
#pragma unroll
      for (int c = 0; c < 8; ++c) ex.recv[c * 128 + tid] = make_float4(x[4 * c], x[4 * c + 1], x[4 * c + 2], x[4 * c + 3]);
      named_barrier_arrive(p_ready, 256);
    } else {
      named_barrier(p_ready, 256);
#pragma unroll
      for (int c = 0; c < 8; ++c) {
        const float4 p = p4[c * 128 + tid];
        const float pe[4] = {p.x, p.y, p.z, p.w};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int k = 4 * c + e;
          x[k] = __fmul_rn(pe[e], x[k] - dl[8 * c + 2 * t + (e & 1)]);
        }
      }
      __syncwarp();
      if (lane == 0 && i + 1 < w.n) cluster::arrive_remote(ex.peer_recv_free);  // both received halves read
    }
    accumulate_tiles<BQ>(acc, x, n_addr0 + stage);  // Pᵀ or dSᵀ (rounded to bf16) times dO or Q
    __syncwarp();
    if (lane == 0) wgmma::mbarrier_arrive(empty(s));
    if (filler && i + 2 < w.n) {
      fill(i + 2, fill_h, fill_qt);
      next(fill_h, fill_qt);
    }
  }

  store_dkdv_rows<D>(acc, wg == 0, a, part, w, key0, t, col0);
  cluster::sync();  // the peer no longer touches this block's shared memory
}

// ---------------------------------------------------------------------------------------------
// launcher

/// key_tiles tiles of 64 positions (numbering a.offsets) x kv heads x part.splits clusters of two
/// blocks, then (splits > 1) the reduction of the partials; a.d 512, bf16, 16-byte aligned rows.
inline status launch_wgmma_dkdv_cluster(cudaStream_t stream, const char* op, std::int64_t key_tiles,
                                        const dkdv_args<bf16>& a, const dkdv_partials& part) {
  using shape = dkdv_cluster_shape;
  if (a.d != shape::d)
    return {status_code::unsupported, std::string(op) + ": the clustered dK/dV kernel runs head dim 512 only"};
  const std::int64_t blocks = 2 * key_tiles * a.kv_heads * part.splits;
  if (blocks > 0x7fffffffLL || key_tiles * a.kv_heads > 0x7fffffffLL)
    return {status_code::unsupported, std::string(op) + ": too many tokens or kv heads for one CUDA grid"};
  tma_dkdv_maps maps{};
  TANDEM_RETURN_IF_ERROR(encode_rows_map(op, "keys", a.k, a.tokens, a.kv_heads, a.d, shape::keys, maps.k_map));
  TANDEM_RETURN_IF_ERROR(encode_rows_map(op, "values", a.v, a.tokens, a.kv_heads, a.d, shape::keys, maps.v_map));
  TANDEM_RETURN_IF_ERROR(encode_rows_map(op, "queries", a.q, a.tokens, a.heads, a.d, shape::query_tile, maps.q_map));
  TANDEM_RETURN_IF_ERROR(
      encode_rows_map(op, "output gradients", a.dout, a.tokens, a.heads, a.d, shape::query_tile, maps.dout_map));
  constexpr auto kernel = &wgmma_dkdv_cluster_kernel;
  TANDEM_RETURN_IF_ERROR(allow_shared_memory<kernel>(shape::smem_bytes));
  kernel<<<static_cast<unsigned>(blocks), shape::threads, shape::smem_bytes, stream>>>(a, part, maps);
  status st = launch_status(op, "wgmma_dkdv_cluster_kernel");
  if (!st.ok() || part.splits == 1) return st;
  dkdv_reduce_kernel<shape::d, shape::keys>
      <<<dim3(static_cast<unsigned>(key_tiles * a.kv_heads), shape::keys / 8), 256, 0, stream>>>(a, part);
  return launch_status(op, "dkdv_reduce_kernel");
}

}  // namespace tandem::gpu::ops::cuda::attn::mma
