// Do Hopper's two tensor-core paths round alike? The attention forward multiplies with wgmma
// (m64nNk16, 64 rows a warpgroup); a decode kernel with 16-row tiles would use mma.sync
// (m16n8k16). A generated token's logprob equals the trainer's only if both give the same bits,
// so this probe runs the two products of the forward through both paths on the same operands and
// counts the elements whose bits differ:
//   Q·Kᵀ: A [64][256] and B [64 keys][256] from shared memory (sw128, as the forward stages Q and
//         K), 16 k-steps accumulated onto a random C (the forward accumulates onto its scores);
//   P·V:  A [64][64] from registers (the m16n8k16 A fragments, as the forward holds P) and
//         B [64 keys][256] from shared memory transposed (as V), 4 k-steps onto a random C.
// Values are bfloat16 with magnitudes spread over 2^-6 .. 2^6, so a different order or width of
// the sum shows. It uses the attention kernels' own instruction wrappers (gpu/ops/cuda/wgmma.cuh,
// attention_mma_common.cuh). Prints the counts; exits 0 when it ran (whatever it found), 1 on a
// CUDA error, 2 without a Hopper GPU.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "gpu/ops/cuda/attention_mma_common.cuh"
#include "gpu/ops/cuda/wgmma.cuh"

namespace {

namespace wg = tandem::gpu::ops::cuda::attn::wgmma;
namespace mm = tandem::gpu::ops::cuda::attn::mma;

constexpr int M = 64, QK_K = 256, QK_N = 64;  // Q·Kᵀ: [64 x 256] · [256 x 64]
constexpr int PV_K = 64, PV_N = 256;          // P·V: [64 x 64] · [64 x 256]

/// Byte offset of element (r, c) of a [rows][cols] bf16 tile in the sw128 layout (wgmma.cuh).
__host__ __device__ int sw128_offset(int rows, int r, int c) {
  const int chunk = (c % 64) / 8;
  return (c / 64) * rows * 128 + r * 128 + ((chunk ^ (r & 7)) << 4) + (c % 8) * 2;
}

__device__ std::uint32_t pack(__nv_bfloat16 lo, __nv_bfloat16 hi) {
  std::uint16_t a, b;
  std::memcpy(&a, &lo, 2);
  std::memcpy(&b, &hi, 2);
  return static_cast<std::uint32_t>(a) | (static_cast<std::uint32_t>(b) << 16);
}

/// Stages a [rows][cols] row-major tile into shared memory (sw128), all threads of the block.
__device__ void stage(unsigned char* dst, const __nv_bfloat16* src, int rows, int cols) {
  for (int i = static_cast<int>(threadIdx.x); i < rows * cols; i += static_cast<int>(blockDim.x))
    *reinterpret_cast<__nv_bfloat16*>(dst + sw128_offset(rows, i / cols, i % cols)) = src[i];
}

/// The accumulator element of m64nN for thread 32w + 4g + t, register 4i + e (wgmma.cuh's table).
__device__ void acc_position(int reg, int& row, int& col) {
  const int w = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32, g = lane / 4, t = lane % 4;
  const int i = reg / 4, e = reg % 4;
  row = 16 * w + g + (e >= 2 ? 8 : 0);
  col = 8 * i + 2 * t + (e & 1);
}

/// The m16n8k16 A fragment of rows 16w .. 16w + 15, k-step kk, of a row-major [64][k] matrix.
__device__ void a_fragment(const __nv_bfloat16* a, int k, int kk, std::uint32_t (&f)[4]) {
  const int w = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32, g = lane / 4, t = lane % 4;
  const __nv_bfloat16* r0 = a + (16 * w + g) * k + 16 * kk;
  const __nv_bfloat16* r1 = r0 + 8 * k;
  f[0] = pack(r0[2 * t], r0[2 * t + 1]);
  f[1] = pack(r1[2 * t], r1[2 * t + 1]);
  f[2] = pack(r0[2 * t + 8], r0[2 * t + 9]);
  f[3] = pack(r1[2 * t + 8], r1[2 * t + 9]);
}

/// One warpgroup: d = C + A·Bᵀ (Q·Kᵀ, wgmma m64n64k16, both from shared memory) and
/// e = C' + P·V (wgmma m64n256k16, P from registers, V transposed from shared memory).
__global__ void __launch_bounds__(128) wgmma_products(const __nv_bfloat16* q, const __nv_bfloat16* k, const float* c_qk,
                                                      const __nv_bfloat16* p, const __nv_bfloat16* v, const float* c_pv,
                                                      float* out_qk, float* out_pv) {
  extern __shared__ unsigned char raw[];
  unsigned char* const base = raw + ((1024u - (mm::shared_address(raw) & 1023u)) & 1023u);
  unsigned char* const qs = base;                  // sw128 [64][256]
  unsigned char* const ks = qs + M * QK_K * 2;     // sw128 [64][256]
  unsigned char* const vs = ks + QK_N * QK_K * 2;  // sw128 [64 keys][256]
  stage(qs, q, M, QK_K);
  stage(ks, k, QK_N, QK_K);
  stage(vs, v, PV_K, PV_N);
  wg::fence_proxy_async();
  __syncthreads();
  float d[32];
  for (int r = 0; r < 32; ++r) {
    int row, col;
    acc_position(r, row, col);
    d[r] = c_qk[row * QK_N + col];
  }
  const std::uint32_t q_addr = mm::shared_address(qs), k_addr = mm::shared_address(ks), v_addr = mm::shared_address(vs);
  wg::fence();
  for (int c0 = 0; c0 < QK_K; c0 += 16) {
    const std::uint64_t da = wg::sw128_desc(q_addr + (c0 >> 6) * M * 128 + (c0 & 63) * 2, 16, 1024);
    const std::uint64_t db = wg::sw128_desc(k_addr + (c0 >> 6) * QK_N * 128 + (c0 & 63) * 2, 16, 1024);
    wg::mma_ss_m64n64k16(d, da, db, true);
  }
  wg::commit();
  wg::wait<0>();
  wg::fence_registers(d);
  for (int r = 0; r < 32; ++r) {
    int row, col;
    acc_position(r, row, col);
    out_qk[row * QK_N + col] = d[r];
  }
  float o[128];
  for (int r = 0; r < 128; ++r) {
    int row, col;
    acc_position(r, row, col);
    o[r] = c_pv[row * PV_N + col];
  }
  wg::fence();
  for (int kk = 0; kk < PV_K / 16; ++kk) {
    std::uint32_t a[4];
    a_fragment(p, PV_K, kk, a);
    wg::mma_rs_m64n256k16_tn(o, a, wg::sw128_desc(v_addr + kk * 16 * 128, PV_K * 128, 1024));
  }
  wg::commit();
  wg::wait<0>();
  wg::fence_registers(o);
  for (int r = 0; r < 128; ++r) {
    int row, col;
    acc_position(r, row, col);
    out_pv[row * PV_N + col] = o[r];
  }
}

/// Four warps, each its 16 rows with mma.sync m16n8k16: the same two products, k-steps in order.
__global__ void __launch_bounds__(128) mma_sync_products(const __nv_bfloat16* q, const __nv_bfloat16* k, const float* c_qk,
                                                         const __nv_bfloat16* p, const __nv_bfloat16* v, const float* c_pv,
                                                         float* out_qk, float* out_pv) {
  const int w = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32, g = lane / 4, t = lane % 4;
  const auto run = [&](const __nv_bfloat16* a, int kdim, int n, const float* c, float* out, auto b_of) {
    for (int i = 0; i < n / 8; ++i) {
      float acc[4];
      for (int e = 0; e < 4; ++e) acc[e] = c[(16 * w + g + (e >= 2 ? 8 : 0)) * n + 8 * i + 2 * t + (e & 1)];
      for (int kk = 0; kk < kdim / 16; ++kk) {
        std::uint32_t fa[4], b0, b1;
        a_fragment(a, kdim, kk, fa);
        b_of(i, kk, b0, b1);
        mm::mma_bf16(acc, fa, b0, b1);
      }
      for (int e = 0; e < 4; ++e) out[(16 * w + g + (e >= 2 ? 8 : 0)) * n + 8 * i + 2 * t + (e & 1)] = acc[e];
    }
  };
  // B(kk, n) of Q·Kᵀ is K[n][kk]: b[0] = (K[8i + g][16kk + 2t], +1), b[1] the same 8 further.
  run(q, QK_K, QK_N, c_qk, out_qk, [&](int i, int kk, std::uint32_t& b0, std::uint32_t& b1) {
    const __nv_bfloat16* r = k + (8 * i + g) * QK_K + 16 * kk;
    b0 = pack(r[2 * t], r[2 * t + 1]);
    b1 = pack(r[2 * t + 8], r[2 * t + 9]);
  });
  // B(kk, n) of P·V is V[kk][n].
  run(p, PV_K, PV_N, c_pv, out_pv, [&](int i, int kk, std::uint32_t& b0, std::uint32_t& b1) {
    const int n = 8 * i + g, k0 = 16 * kk + 2 * t;
    b0 = pack(v[k0 * PV_N + n], v[(k0 + 1) * PV_N + n]);
    b1 = pack(v[(k0 + 8) * PV_N + n], v[(k0 + 9) * PV_N + n]);
  });
}

bool ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "tensor_core_rounding: %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

/// Random bfloat16 values, sign and magnitude 2^[-6, 6) spread.
std::vector<__nv_bfloat16> values(std::size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> exponent(-6, 6), mantissa(1, 2);
  std::vector<__nv_bfloat16> out(n);
  for (auto& x : out) x = __float2bfloat16(static_cast<float>((rng() & 1 ? -1 : 1) * mantissa(rng) * std::exp2(exponent(rng))));
  return out;
}

std::vector<float> accumulators(std::size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(-64, 64);
  std::vector<float> out(n);
  for (auto& x : out) x = u(rng);
  return out;
}

template <class T>
T* upload(const std::vector<T>& h) {
  T* d = nullptr;
  if (!ok(cudaMalloc(&d, h.size() * sizeof(T)), "cudaMalloc")) return nullptr;
  if (!ok(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy")) return nullptr;
  return d;
}

}  // namespace

int main() {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess || prop.major != 9) {
    std::fprintf(stderr, "tensor_core_rounding: needs a Hopper GPU (compute capability 9.x)\n");
    return 2;
  }
  std::printf("tensor_core_rounding on %s: elements whose bits differ between wgmma and mma.sync\n", prop.name);
  const int smem = 1024 + (M * QK_K + QK_N * QK_K + PV_K * PV_N) * 2;
  if (!ok(cudaFuncSetAttribute(wgmma_products, cudaFuncAttributeMaxDynamicSharedMemorySize, smem), "smem attribute")) return 1;
  int differ_total = 0;
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    std::mt19937_64 rng(seed);
    const auto q = values(M * QK_K, rng), k = values(QK_N * QK_K, rng), p = values(M * PV_K, rng), v = values(PV_K * PV_N, rng);
    auto c_qk = accumulators(M * QK_N, rng), c_pv = accumulators(M * PV_N, rng);
    if (seed == 4) {  // from zero, as a first tile's product
      std::fill(c_qk.begin(), c_qk.end(), 0.f);
      std::fill(c_pv.begin(), c_pv.end(), 0.f);
    }
    auto *dq = upload(q), *dk = upload(k), *dp = upload(p), *dv = upload(v);
    auto *dcq = upload(c_qk), *dcp = upload(c_pv);
    std::vector<float> zero_qk(M * QK_N), zero_pv(M * PV_N);
    auto *wq = upload(zero_qk), *wp = upload(zero_pv), *sq = upload(zero_qk), *sp = upload(zero_pv);
    if (!dq || !dk || !dp || !dv || !dcq || !dcp || !wq || !wp || !sq || !sp) return 1;
    wgmma_products<<<1, 128, smem>>>(dq, dk, dcq, dp, dv, dcp, wq, wp);
    mma_sync_products<<<1, 128>>>(dq, dk, dcq, dp, dv, dcp, sq, sp);
    if (!ok(cudaDeviceSynchronize(), "the products")) return 1;
    std::vector<float> a_qk(M * QK_N), b_qk(M * QK_N), a_pv(M * PV_N), b_pv(M * PV_N);
    cudaMemcpy(a_qk.data(), wq, a_qk.size() * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(b_qk.data(), sq, b_qk.size() * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(a_pv.data(), wp, a_pv.size() * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(b_pv.data(), sp, b_pv.size() * 4, cudaMemcpyDeviceToHost);
    const auto count = [](const std::vector<float>& x, const std::vector<float>& y) {
      int n = 0;
      for (std::size_t i = 0; i < x.size(); ++i) n += std::memcmp(&x[i], &y[i], 4) != 0;
      return n;
    };
    // A check of the probe itself: the two paths agree to float32 rounding (a wrong fragment or
    // layout would differ by whole products).
    double worst = 0;
    for (std::size_t i = 0; i < a_qk.size(); ++i) worst = std::max(worst, std::fabs(double(a_qk[i]) - b_qk[i]) / (std::fabs(b_qk[i]) + 1e-3));
    for (std::size_t i = 0; i < a_pv.size(); ++i) worst = std::max(worst, std::fabs(double(a_pv[i]) - b_pv[i]) / (std::fabs(b_pv[i]) + 1e-3));
    const int n_qk = count(a_qk, b_qk), n_pv = count(a_pv, b_pv);
    differ_total += n_qk + n_pv;
    std::printf("  seed %llu%s: Q·Kᵀ (shared-memory operands) %d of %d differ; P·V (A from registers) %d of %d differ; "
                "largest relative gap %.3g\n",
                static_cast<unsigned long long>(seed), seed == 4 ? " (from zero)" : "", n_qk, M * QK_N, n_pv, M * PV_N, worst);
    for (void* ptr : {static_cast<void*>(dq), static_cast<void*>(dk), static_cast<void*>(dp), static_cast<void*>(dv),
                      static_cast<void*>(dcq), static_cast<void*>(dcp), static_cast<void*>(wq), static_cast<void*>(wp),
                      static_cast<void*>(sq), static_cast<void*>(sp)})
      cudaFree(ptr);
  }
  std::printf("%s\n", differ_total == 0 ? "the two paths gave the same bits everywhere"
                                        : "the two paths round differently: a 16-row decode kernel would not give the forward's bits");
  return 0;
}
