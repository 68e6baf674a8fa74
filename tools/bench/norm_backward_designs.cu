// Which design of the RMSNorm backward reaches the copy bandwidth at E2B's small shapes? The kept
// kernel (gpu/ops/cuda/rmsnorm.cu: x and dy copied into shared-memory stages, a finish kernel for
// dw) read 49-58% of copy at [4096, 1536] and [32768, 256] on an H100. This probe times, in one
// run and beside the kept op (ops::cuda::rmsnorm_backward) and a 1 GiB device copy, a design
// without shared memory: each group of G threads takes a row, x and dy loaded with 16-byte loads
// L rows ahead into registers, w's vectors held in registers, BPS blocks an SM; dw's block
// partials summed by a separate finish kernel, by a programmatic dependent one, or in the same
// kernel after a cooperative grid barrier. Each design's dx is compared with the kept op's bit for
// bit (the same arithmetic a row) and its dw within bfloat16 rounding (partials summed in another
// order). Beside them, the kept op's rows kernel alone (dx only) and the plainest op moving the
// same bytes (add_forward, x + dy into dx): what a call of this size can reach. The designs use
// the kept kernels' vector helpers (gpu/ops/cuda/row_vectors.cuh). Times: median per call of 20
// CUDA-event-timed batches of 10 calls. Exits 0 when it ran (whatever it found), 1 on a CUDA
// error, 2 without a GPU. Bfloat16 storage.
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <utility>
#include <vector>

#include "gpu/core/exec_context.h"
#include "gpu/core/tensor.h"
#include "gpu/ops/cuda/elementwise.h"
#include "gpu/ops/cuda/rmsnorm.h"
#include "gpu/ops/cuda/row_vectors.cuh"

namespace {

namespace cg = cooperative_groups;
namespace tg = tandem::gpu;
using bf16 = __nv_bfloat16;
using i64 = std::int64_t;
constexpr int V = 8;  // bf16 elements a 16-byte vector

#define CK(x)                                                                        \
  do {                                                                               \
    const cudaError_t e_ = (x);                                                      \
    if (e_ != cudaSuccess) {                                                         \
      std::printf("norm_backward_designs: %s: %s\n", #x, cudaGetErrorString(e_));   \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

// The kept kernels' vector helpers (gpu/ops/cuda/row_vectors.cuh) at bfloat16.
using tandem::gpu::ops::cuda::group_sum;
using tandem::gpu::ops::cuda::warp_sum;
__device__ __forceinline__ void unpack(const uint4& raw, float (&v)[V]) { tandem::gpu::ops::cuda::unpack<bf16>(raw, v); }
__device__ __forceinline__ uint4 pack(const float (&v)[V]) { return tandem::gpu::ops::cuda::pack<bf16>(v); }
__device__ __forceinline__ uint4 ldnc(const bf16* p) { return tandem::gpu::ops::cuda::load16_stream(p); }

// dw[j] += Σ_b partial[b, j]: 8 columns x 32 slices a block. PDL: waits for the grid before.
constexpr int fc = 8, fs = 32;
template <bool PDL>
__global__ void __launch_bounds__(256) finish_kernel(const float* __restrict__ partial, i64 blocks, i64 d, bf16* __restrict__ dw) {
  if constexpr (PDL) asm volatile("griddepcontrol.wait;" ::: "memory");
  __shared__ float sums[fs][fc];
  const int column = threadIdx.x % fc, slice = threadIdx.x / fc;
  const i64 j = static_cast<i64>(blockIdx.x) * fc + column;
  const i64 per = (blocks + fs - 1) / fs;
  const i64 b0 = slice * per, b1 = b0 + per < blocks ? b0 + per : blocks;
  float acc = 0.f;
  if (j < d) {
#pragma unroll 16
    for (i64 b = b0; b < b1; ++b) acc += partial[b * d + j];
  }
  sums[slice][column] = acc;
  __syncthreads();
  if (slice != 0 || j >= d) return;
  float total = sums[0][column];
#pragma unroll
  for (int s = 1; s < fs; ++s) total += sums[s][column];
  dw[j] = __float2bfloat16_rn(__bfloat162float(dw[j]) + total);
}

// ------------------------------------------------------------------------------------------ V1
// Group g of a block takes its rows i = g, g + R, ... (row blockIdx + i·gridDim), loading the rows
// L iterations ahead into registers (plain 16-byte loads, L1 bypassed); w's vectors held in
// registers. MODE 0: partial then a separate finish; 1: PDL trigger; 2: cooperative grid sync and
// the finish in-kernel.
template <int G, int K, int L, int BPS, int MODE, int T = 256>
__global__ void __launch_bounds__(T, BPS) v1_kernel(const bf16* __restrict__ x, const bf16* __restrict__ w,
                                                              const float* __restrict__ inv_rms, const bf16* __restrict__ dy,
                                                              i64 rows, int nv, i64 rows_per_block, bf16* __restrict__ dx,
                                                              float* __restrict__ partial, bf16* __restrict__ dw) {
  constexpr int R = T / G;
  __shared__ float shared[T / 32];
  __shared__ __align__(16) float combine[K * G * V > 256 ? K * G * V : 256];
  const int t = threadIdx.x % G, g = threadIdx.x / G;
  const i64 d = static_cast<i64>(nv) * V;
  const auto row_of = [&](i64 i) { return static_cast<i64>(blockIdx.x) + i * gridDim.x; };
  const auto row_live = [&](i64 i) { return i < rows_per_block && row_of(i) < rows; };
  uint4 wp[K];
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int c = t + k * G;
    wp[k] = c < nv ? __ldg(reinterpret_cast<const uint4*>(w + static_cast<i64>(c) * V)) : make_uint4(0, 0, 0, 0);
  }
  float acc[K][V];
#pragma unroll
  for (int k = 0; k < K; ++k)
#pragma unroll
    for (int e = 0; e < V; ++e) acc[k][e] = 0.f;
  uint4 xs[L + 1][K], gs[L + 1][K];
  float invs[L + 1];
  auto load = [&](int s, i64 it) {
    const i64 ri = it * R + g;
    const bool live = row_live(ri);
    const i64 r = row_of(ri);
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int c = t + k * G;
      const bool in = live && c < nv;
      xs[s][k] = in ? ldnc(x + r * d + static_cast<i64>(c) * V) : make_uint4(0, 0, 0, 0);
      gs[s][k] = in ? ldnc(dy + r * d + static_cast<i64>(c) * V) : make_uint4(0, 0, 0, 0);
    }
    invs[s] = live ? __ldg(inv_rms + r) : 0.f;
  };
  const i64 iters = (rows_per_block + R - 1) / R;
#pragma unroll
  for (int s = 0; s < L; ++s) load(s, s);
#pragma unroll 1
  for (i64 it = 0; it < iters; it += L + 1) {
#pragma unroll
    for (int s = 0; s <= L; ++s) {
      // slot s holds iteration it + s; load iteration it + s + L into slot (s + L) % (L + 1)
      load((s + L) % (L + 1), it + s + L);
      const i64 ri = (it + s) * R + g;
      const bool live = row_live(ri);
      const i64 r = row_of(ri);
      const float inv = invs[s];
      float dot = 0.f;
#pragma unroll
      for (int k = 0; k < K; ++k) {
        float xv[V], gv[V], wv[V];
        unpack(xs[s][k], xv);
        unpack(gs[s][k], gv);
        unpack(wp[k], wv);
#pragma unroll
        for (int e = 0; e < V; ++e) dot += gv[e] * wv[e] * xv[e] * inv;
      }
      if (it + s >= iters) break;  // uniform over the block
      const float mean_dot = group_sum<G>(dot, shared) / static_cast<float>(d);
      if (live) {
#pragma unroll
        for (int k = 0; k < K; ++k) {
          const int c = t + k * G;
          if (c >= nv) continue;
          float xv[V], gv[V], wv[V], out[V];
          unpack(xs[s][k], xv);
          unpack(gs[s][k], gv);
          unpack(wp[k], wv);
#pragma unroll
          for (int e = 0; e < V; ++e) {
            acc[k][e] += gv[e] * xv[e] * inv;
            out[e] = inv * (gv[e] * wv[e] - xv[e] * inv * mean_dot);
          }
          *reinterpret_cast<uint4*>(dx + r * d + static_cast<i64>(c) * V) = pack(out);
        }
      }
    }
  }
  float* prow = partial + static_cast<i64>(blockIdx.x) * d;
#pragma unroll 1
  for (int gg = 0; gg < R; ++gg) {
    if (g == gg) {
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const int c = t + k * G;
        if (c >= nv) continue;
#pragma unroll
        for (int e = 0; e < V; ++e) {
          float* s = combine + (k * G + t) * V + e;
          const float v = gg == 0 ? acc[k][e] : *s + acc[k][e];
          if (gg == R - 1) prow[static_cast<i64>(c) * V + e] = v;
          else *s = v;
        }
      }
    }
    if (R > 1) __syncthreads();
  }
  if constexpr (MODE == 1) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  if constexpr (MODE == 2) {
    cg::this_grid().sync();
    // columns j of this block: blockIdx.x + gridDim.x·m; a thread per (column-in-block, slice)
    const i64 blocks = gridDim.x;
    for (i64 j0 = static_cast<i64>(blockIdx.x) * fc; j0 < d; j0 += static_cast<i64>(gridDim.x) * fc) {
      __syncthreads();
      const int column = threadIdx.x % fc, slice = threadIdx.x / fc;
      const i64 j = j0 + column;
      const i64 per = (blocks + fs - 1) / fs;
      const i64 b0 = slice * per, b1 = b0 + per < blocks ? b0 + per : blocks;
      float a = 0.f;
      if (j < d)
        for (i64 b = b0; b < b1; ++b) a += partial[b * d + j];
      combine[slice * fc + column] = a;
      __syncthreads();
      if (slice == 0 && j < d) {
        float total = combine[column];
        for (int s = 1; s < fs; ++s) total += combine[s * fc + column];
        dw[j] = __float2bfloat16_rn(__bfloat162float(dw[j]) + total);
      }
    }
  }
}


float time_batched(const std::function<void()>& f) {
  for (int i = 0; i < 3; ++i) f();
  CK(cudaDeviceSynchronize());
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  std::vector<float> ms;
  for (int r = 0; r < 20; ++r) {
    CK(cudaEventRecord(a));
    for (int i = 0; i < 10; ++i) f();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float t = 0;
    CK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t / 10);
  }
  CK(cudaGetLastError());
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

__global__ void fill(bf16* p, i64 n, unsigned seed, float lo, float hi) {
  for (i64 i = blockIdx.x * static_cast<i64>(blockDim.x) + threadIdx.x; i < n; i += static_cast<i64>(gridDim.x) * blockDim.x) {
    unsigned h = static_cast<unsigned>(i) * 2654435761u ^ seed;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    p[i] = __float2bfloat16_rn(lo + (hi - lo) * static_cast<float>(h & 0xffffff) / 16777216.f);
  }
}
__global__ void fill_inv(float* p, i64 n) {
  for (i64 i = blockIdx.x * static_cast<i64>(blockDim.x) + threadIdx.x; i < n; i += static_cast<i64>(gridDim.x) * blockDim.x)
    p[i] = 0.5f + static_cast<float>(i % 7) * 0.1f;
}

struct problem {
  i64 rows = 0, d = 0;
  bf16 *x = nullptr, *w = nullptr, *dy = nullptr, *dx = nullptr, *dw = nullptr;
  float *inv = nullptr, *partial = nullptr;
};

std::vector<std::uint16_t> read_bf16(const bf16* p, i64 n) {
  std::vector<std::uint16_t> h(static_cast<std::size_t>(n));
  CK(cudaMemcpy(h.data(), p, static_cast<std::size_t>(n) * 2, cudaMemcpyDeviceToHost));
  return h;
}
float bf16_value(std::uint16_t b) {
  const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "norm_backward_designs: needs a CUDA GPU\n");
    return 2;
  }
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  double copy_gbs = 0;
  {
    const i64 bytes = i64{1} << 30;
    void *s = nullptr, *d = nullptr;
    CK(cudaMalloc(&s, bytes));
    CK(cudaMalloc(&d, bytes));
    const float ms = time_batched([&] { CK(cudaMemcpyAsync(d, s, bytes, cudaMemcpyDeviceToDevice)); });
    copy_gbs = 2.0 * bytes / ms / 1e6;
    CK(cudaFree(s));
    CK(cudaFree(d));
  }
  std::printf("norm_backward_designs on %s (%d SMs): copy of 1 GiB %.0f GB/s (read + written)\n", prop.name, sms, copy_gbs);
  tg::workspace scratch(tg::device::cuda(0));
  tg::exec_context ctx;
  ctx.dev = tg::device::cuda(0);
  ctx.scratch = &scratch;
  const std::pair<i64, i64> shapes[] = {{4096, 1536}, {32768, 256}, {143360, 256}};
  for (const auto& [rows, d] : shapes) {
    problem p;
    p.rows = rows;
    p.d = d;
    CK(cudaMalloc(&p.x, rows * d * 2));
    CK(cudaMalloc(&p.dy, rows * d * 2));
    CK(cudaMalloc(&p.dx, rows * d * 2));
    CK(cudaMalloc(&p.w, d * 2));
    CK(cudaMalloc(&p.dw, d * 2));
    CK(cudaMalloc(&p.inv, rows * 4));
    CK(cudaMalloc(&p.partial, 8 * 132 * d * 4));
    fill<<<1024, 256>>>(p.x, rows * d, 1, -2, 2);
    fill<<<1024, 256>>>(p.dy, rows * d, 2, -1, 1);
    fill<<<64, 256>>>(p.w, d, 3, 0.5, 1.5);
    fill_inv<<<256, 256>>>(p.inv, rows);
    CK(cudaDeviceSynchronize());
    const double bytes = 3.0 * static_cast<double>(rows * d) * 2;
    const int nv = static_cast<int>(d / V);
    const cudaStream_t st = nullptr;
    // The kept op, once for its results (dw from zeros), then timed.
    const tg::device dev = tg::device::cuda(0);
    const tg::tensor tx = tg::tensor::contiguous(p.x, tg::dtype::bfloat16, std::vector<i64>{rows, d}, dev);
    const tg::tensor tdy = tg::tensor::contiguous(p.dy, tg::dtype::bfloat16, std::vector<i64>{rows, d}, dev);
    const tg::tensor tdx = tg::tensor::contiguous(p.dx, tg::dtype::bfloat16, std::vector<i64>{rows, d}, dev);
    const tg::tensor tw = tg::tensor::contiguous(p.w, tg::dtype::bfloat16, std::vector<i64>{d}, dev);
    const tg::tensor tdw = tg::tensor::contiguous(p.dw, tg::dtype::bfloat16, std::vector<i64>{d}, dev);
    const tg::tensor tinv = tg::tensor::contiguous(p.inv, tg::dtype::float32, std::vector<i64>{rows}, dev);
    const auto kept = [&] {
      if (const tg::status s = tg::ops::cuda::rmsnorm_backward(ctx, tg::dtype::bfloat16, tx, tw, tinv, tdy, tdx, tdw, false); !s) {
        std::printf("norm_backward_designs: the kept op: %s\n", s.message().c_str());
        std::exit(1);
      }
    };
    CK(cudaMemset(p.dw, 0, d * 2));
    kept();
    CK(cudaDeviceSynchronize());
    const std::vector<std::uint16_t> dx_kept = read_bf16(p.dx, rows * d), dw_kept = read_bf16(p.dw, d);
    const auto report = [&](const char* name, float ms) {
      std::printf("  [%lld, %lld] %-36s %8.2f us %6.1f%% of copy", static_cast<long long>(rows), static_cast<long long>(d), name,
                  ms * 1e3, 100.0 * bytes / ms / 1e6 / copy_gbs);
      std::fflush(stdout);
    };
    report("kept op (rmsnorm.cu)", time_batched(kept));
    std::printf("\n");
    // Where the kept op's time goes: its rows kernel alone (no dw asked: no partials, no finish),
    // and the plainest op moving the same bytes (add_forward: x + dy into dx).
    report("kept op, dx only (no dw, no finish)", time_batched([&] {
             if (const tg::status s = tg::ops::cuda::rmsnorm_backward(ctx, tg::dtype::bfloat16, tx, tw, tinv, tdy, tdx,
                                                                       tg::tensor{}, false);
                 !s) {
               std::printf("norm_backward_designs: the kept op without dw: %s\n", s.message().c_str());
               std::exit(1);
             }
           }));
    std::printf("\n");
    report("the same bytes: x + dy into dx", time_batched([&] {
             if (const tg::status s = tg::ops::cuda::add_forward(ctx, tg::dtype::bfloat16, tx, tdy, tdx); !s) {
               std::printf("norm_backward_designs: add_forward: %s\n", s.message().c_str());
               std::exit(1);
             }
           }));
    std::printf("\n");
    const auto finish = [&](i64 blocks, bool dependent) {
      const auto fb = static_cast<unsigned>((d + fc - 1) / fc);
      if (!dependent) {
        finish_kernel<false><<<fb, 256, 0, st>>>(p.partial, blocks, d, p.dw);
        return;
      }
      cudaLaunchAttribute at{};
      at.id = cudaLaunchAttributeProgrammaticStreamSerialization;
      at.val.programmaticStreamSerializationAllowed = 1;
      cudaLaunchConfig_t cfg{};
      cfg.gridDim = dim3(fb);
      cfg.blockDim = dim3(256);
      cfg.stream = st;
      cfg.attrs = &at;
      cfg.numAttrs = 1;
      CK(cudaLaunchKernelEx(&cfg, finish_kernel<true>, static_cast<const float*>(p.partial), blocks, d, p.dw));
    };
    // A design's call; then its dx and dw (from zeros) against the kept op's.
    const auto design = [&](const char* name, auto gk, auto kk, auto lk, auto bk, auto mk, auto tk) {
      constexpr int G = decltype(gk)::value, K = decltype(kk)::value, L = decltype(lk)::value, BPS = decltype(bk)::value,
                    MODE = decltype(mk)::value, T = decltype(tk)::value, R = T / G;
      if (G * K < nv || G * K - nv >= G || G > nv) return;  // not a shape for these rows
      int occ = 0;
      CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, v1_kernel<G, K, L, BPS, MODE, T>, T, 0));
      const i64 grid = static_cast<i64>(sms) * std::min(BPS, occ);
      const i64 groups = (rows + R - 1) / R, rpb = (groups + grid - 1) / grid * R, blocks = (rows + rpb - 1) / rpb;
      const auto call = [&] {
        if constexpr (MODE == 2) {
          const bf16 *x = p.x, *w = p.w, *dy = p.dy;
          const float* inv = p.inv;
          i64 rows_ = rows, rpb_ = rpb;
          int nv_ = nv;
          bf16 *dx = p.dx, *dw = p.dw;
          float* part = p.partial;
          void* args[] = {&x, &w, &inv, &dy, &rows_, &nv_, &rpb_, &dx, &part, &dw};
          CK(cudaLaunchCooperativeKernel(reinterpret_cast<void*>(v1_kernel<G, K, L, BPS, MODE, T>), dim3(static_cast<unsigned>(blocks)),
                                         dim3(T), args, 0, st));
        } else {
          v1_kernel<G, K, L, BPS, MODE, T><<<static_cast<unsigned>(blocks), T, 0, st>>>(p.x, p.w, p.inv, p.dy, rows, nv, rpb, p.dx,
                                                                                       p.partial, p.dw);
          finish(blocks, MODE == 1);
        }
      };
      report(name, time_batched(call));
      CK(cudaMemset(p.dx, 0, rows * d * 2));
      CK(cudaMemset(p.dw, 0, d * 2));
      call();
      CK(cudaDeviceSynchronize());
      const std::vector<std::uint16_t> dx = read_bf16(p.dx, rows * d), dw = read_bf16(p.dw, d);
      i64 dx_differ = 0;
      for (std::size_t i = 0; i < dx.size(); ++i) dx_differ += dx[i] != dx_kept[i];
      double dw_rel = 0;
      for (std::size_t j = 0; j < dw.size(); ++j)
        dw_rel = std::max(dw_rel, std::fabs(static_cast<double>(bf16_value(dw[j])) - bf16_value(dw_kept[j])) /
                                      std::max(1e-3, std::fabs(static_cast<double>(bf16_value(dw_kept[j])))));
      std::printf("  (%lld blocks; dx differs in %lld of %lld; dw within %.1e)\n", static_cast<long long>(blocks),
                  static_cast<long long>(dx_differ), static_cast<long long>(rows * d), dw_rel);
    };
    using std::integral_constant;
#define IC(n) integral_constant<int, n>{}
    design("G64 K3 L1 bps2", IC(64), IC(3), IC(1), IC(2), IC(0), IC(256));
    design("G64 K3 L1 bps2 dependent finish", IC(64), IC(3), IC(1), IC(2), IC(1), IC(256));
    design("G64 K3 L1 bps2 grid barrier", IC(64), IC(3), IC(1), IC(2), IC(2), IC(256));
    design("G192 K1 L1 bps6 T192", IC(192), IC(1), IC(1), IC(6), IC(0), IC(192));
    design("G192 K1 L2 bps6 T192", IC(192), IC(1), IC(2), IC(6), IC(0), IC(192));
    design("G192 K1 L1 bps6 T192 dependent", IC(192), IC(1), IC(1), IC(6), IC(1), IC(192));
    design("G192 K1 L1 bps6 T192 grid barrier", IC(192), IC(1), IC(1), IC(6), IC(2), IC(192));
    design("G192 K1 L1 bps3 T384", IC(192), IC(1), IC(1), IC(3), IC(0), IC(384));
    design("G32 K1 L1 bps4", IC(32), IC(1), IC(1), IC(4), IC(0), IC(256));
    design("G32 K1 L2 bps4", IC(32), IC(1), IC(2), IC(4), IC(0), IC(256));
    design("G32 K1 L3 bps4", IC(32), IC(1), IC(3), IC(4), IC(0), IC(256));
    design("G32 K1 L1 bps5", IC(32), IC(1), IC(1), IC(5), IC(0), IC(256));
    design("G32 K1 L2 bps4 dependent", IC(32), IC(1), IC(2), IC(4), IC(1), IC(256));
    design("G32 K1 L2 bps4 grid barrier", IC(32), IC(1), IC(2), IC(4), IC(2), IC(256));
    design("G32 K1 L1 bps5 grid barrier", IC(32), IC(1), IC(1), IC(5), IC(2), IC(256));
#undef IC
    CK(cudaFree(p.x));
    CK(cudaFree(p.dy));
    CK(cudaFree(p.dx));
    CK(cudaFree(p.w));
    CK(cudaFree(p.dw));
    CK(cudaFree(p.inv));
    CK(cudaFree(p.partial));
  }
  return 0;
}
