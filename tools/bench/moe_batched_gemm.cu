// Can a captured MoE decode step run its experts' products as one strided-batched cuBLASLt call
// per matrix over a padded layout (expert e's rows at e·B .. e·B + count_e, the rest computed and
// ignored), with no host wait for the counts? A generated token's logprob equals the trainer's
// only if each real row gets the bits the trainer's call gives it: the row-invariant per-expert
// call with M = count_e (gpu/ops/cuda/cublaslt_gemm.h). For the 26B-A4B shapes (H 2816, Im 704,
// 128 experts) at B = 256 rows, in bfloat16, this probe computes both matrices' products
// (gate_up: [rows, H] · [2·Im, H]ᵀ; down: [rows, Im] · [H, Im]ᵀ) three ways:
//   reference: gemm(row_invariant) per expert with M = count_e (counts spread over 0 .. B);
//   padded:    gemm(row_invariant) per expert with M = B over the padded rows;
//   gemm():    one batched gemm() call (batch E) with the algorithm of one padded product, at
//              M = B and at M = 64 (what a captured decode step runs);
//   batched:   each of cuBLASLt's heuristic algorithms (up to 16, none splitting k) for one
//              strided-batched call (batch E, M = B);
// and prints for each the real rows whose bits differ from the reference and the time of the
// matrix's products for all experts (CUDA events, median of 20). Exits 0 when it ran (whatever it
// found), 1 on a CUDA or cuBLASLt error, 2 without a GPU.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "gpu/core/exec_context.h"
#include "gpu/ops/cuda/cublaslt_gemm.h"

namespace {

namespace tg = tandem::gpu;
namespace cu = tandem::gpu::ops::cuda;

constexpr std::int64_t experts = 128, batch_rows = 256, hidden = 2816, inner = 704;

bool ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "moe_batched_gemm: %s: %s\n", what, cudaGetErrorString(e));
  return false;
}
bool ok(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return true;
  std::fprintf(stderr, "moe_batched_gemm: %s: %s\n", what, cublasLtGetStatusName(s));
  return false;
}

/// Values of magnitude up to 2^2 spread over 2^-6 .. 2^2, a hash of the index and seed: a
/// different order or width of a sum shows in the bits.
__global__ void fill(__nv_bfloat16* p, std::int64_t n, std::uint32_t seed) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    std::uint32_t x = static_cast<std::uint32_t>(i) * 2654435761u ^ seed ^ static_cast<std::uint32_t>(i >> 32) * 40503u;
    x ^= x >> 15;
    x *= 2246822519u;
    x ^= x >> 13;
    const float mantissa = 1.f + static_cast<float>(x & 0xffff) / 65536.f;
    const float v = ldexpf(mantissa, static_cast<int>((x >> 16) % 9) - 6) * ((x >> 31) ? -1.f : 1.f);
    p[i] = __float2bfloat16(v);
  }
}

struct device_array {
  void* p = nullptr;
  explicit device_array(std::size_t bytes) {
    if (!ok(cudaMalloc(&p, bytes), "cudaMalloc")) p = nullptr;
  }
  ~device_array() { cudaFree(p); }
  device_array(const device_array&) = delete;
  device_array& operator=(const device_array&) = delete;
};

/// Median milliseconds of 20 runs of f (after 3 warm runs), CUDA events on the default stream;
/// negative when f or the events failed.
double median_ms(const std::function<bool()>& f) {
  cudaEvent_t start, stop;
  if (!ok(cudaEventCreate(&start), "event") || !ok(cudaEventCreate(&stop), "event")) return -1;
  std::vector<float> ms;
  for (int i = 0; i < 23; ++i) {
    cudaEventRecord(start);
    if (!f()) return -1;
    cudaEventRecord(stop);
    if (!ok(cudaEventSynchronize(stop), "the products")) return -1;
    float t = 0;
    cudaEventElapsedTime(&t, start, stop);
    if (i >= 3) ms.push_back(t);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

/// The real rows (e·B + r, r < count_e) of c whose bits differ from ref's.
std::int64_t differing_rows(const std::vector<std::uint16_t>& c, const std::vector<std::uint16_t>& ref,
                            const std::vector<std::int64_t>& counts, std::int64_t n) {
  std::int64_t rows = 0;
  for (std::int64_t e = 0; e < experts; ++e)
    for (std::int64_t r = 0; r < counts[static_cast<std::size_t>(e)]; ++r) {
      const std::size_t at = static_cast<std::size_t>((e * batch_rows + r) * n);
      if (std::memcmp(c.data() + at, ref.data() + at, static_cast<std::size_t>(n) * 2) != 0) ++rows;
    }
  return rows;
}

bool download(std::vector<std::uint16_t>& host, const void* p) {
  return ok(cudaMemcpy(host.data(), p, host.size() * 2, cudaMemcpyDeviceToHost), "download");
}

/// One matrix: C_e [B, n] = A_e [B, k] · W_eᵀ (W_e [n, k]) for every expert. false on an error.
bool probe(const char* name, std::int64_t n, std::int64_t k, const tg::exec_context& ctx, cublasLtHandle_t handle,
           void* workspace, const std::vector<std::int64_t>& counts) {
  const std::size_t a_count = static_cast<std::size_t>(experts * batch_rows * k);
  const std::size_t w_count = static_cast<std::size_t>(experts * n * k);
  const std::size_t c_count = static_cast<std::size_t>(experts * batch_rows * n);
  device_array a(a_count * 2), w(w_count * 2), c(c_count * 2);
  if (!a.p || !w.p || !c.p) return false;
  fill<<<1024, 256>>>(static_cast<__nv_bfloat16*>(a.p), static_cast<std::int64_t>(a_count), 1);
  fill<<<1024, 256>>>(static_cast<__nv_bfloat16*>(w.p), static_cast<std::int64_t>(w_count), 2);
  if (!ok(cudaDeviceSynchronize(), "fill")) return false;
  const auto* a_p = static_cast<const __nv_bfloat16*>(a.p);
  const auto* w_p = static_cast<const __nv_bfloat16*>(w.p);
  auto* c_p = static_cast<__nv_bfloat16*>(c.p);

  // Expert e's rows times its weight, row-invariant, as moe.cu's products; gemm() reporting.
  const auto operands = [&](std::int64_t e, std::int64_t rows) {
    cu::gemm_operands g;
    g.transpose_b = true;
    g.m = rows, g.n = n, g.k = k;
    g.row_invariant = true;
    g.a = a_p + e * batch_rows * k, g.lda = k;
    g.b = w_p + e * n * k, g.ldb = k;
    g.c = c_p + e * batch_rows * n, g.ldc = n;
    return g;
  };
  const auto run_gemm = [&](const cu::gemm_operands& g) {
    if (tg::status st = cu::gemm(ctx, "moe_batched_gemm", tg::dtype::bfloat16, tg::dtype::bfloat16, g, workspace); !st) {
      std::fprintf(stderr, "moe_batched_gemm: %s\n", st.message().c_str());
      return false;
    }
    return true;
  };
  // The per-expert calls, as the sorted layout makes them, with M = rows(e).
  const auto per_expert = [&](const std::function<std::int64_t(std::int64_t)>& rows) {
    for (std::int64_t e = 0; e < experts; ++e)
      if (!run_gemm(operands(e, rows(e)))) return false;
    return true;
  };
  const auto exact = [&](std::int64_t e) { return counts[static_cast<std::size_t>(e)]; };
  const auto padded = [&](std::int64_t) { return batch_rows; };

  std::vector<std::uint16_t> ref(c_count), got(c_count);
  if (!ok(cudaMemset(c.p, 0, c_count * 2), "memset") || !per_expert(exact) || !ok(cudaDeviceSynchronize(), "reference") ||
      !download(ref, c.p))
    return false;
  const double exact_ms = median_ms([&] { return per_expert(exact); });
  if (!per_expert(padded) || !ok(cudaDeviceSynchronize(), "padded") || !download(got, c.p)) return false;
  const std::int64_t padded_differ = differing_rows(got, ref, counts, n);
  const double padded_ms = median_ms([&] { return per_expert(padded); });
  std::int64_t real_rows = 0;
  for (const std::int64_t r : counts) real_rows += r;
  std::printf("%s: [rows, %lld] · [%lld, %lld]ᵀ, %lld experts, %lld real rows of %lld\n", name, static_cast<long long>(k),
              static_cast<long long>(n), static_cast<long long>(k), static_cast<long long>(experts),
              static_cast<long long>(real_rows), static_cast<long long>(experts * batch_rows));
  std::printf("  %-44s %8.3f ms\n", "per expert, M = count_e (the reference)", exact_ms);
  std::printf("  %-44s %8.3f ms  rows differing: %lld\n", "per expert, M = B (padded)", padded_ms,
              static_cast<long long>(padded_differ));

  // gemm() batched: one call over the experts with the algorithm of one padded product (what the
  // captured MoE decode step runs), at M = B and at M = 64.
  for (const std::int64_t rows : {batch_rows, std::int64_t{64}}) {
    const auto batched_gemm = [&] {
      cu::gemm_operands g = operands(0, rows);
      g.batch = experts, g.stride_a = batch_rows * k, g.stride_b = n * k, g.stride_c = batch_rows * n;
      return run_gemm(g);
    };
    if (!ok(cudaMemset(c.p, 0, c_count * 2), "memset") || !batched_gemm() || !ok(cudaDeviceSynchronize(), "gemm batched") ||
        !download(got, c.p))
      return false;
    // At M = 64 the rows past 64 are not computed: count only the real rows below it.
    std::vector<std::int64_t> within(counts);
    for (std::int64_t& r : within) r = std::min(r, rows);
    const std::string label = "gemm() batched, M = " + std::to_string(rows) + " (one product's algorithm)";
    std::printf("  %-44s %8.3f ms  rows differing: %lld of %lld\n", label.c_str(), median_ms(batched_gemm),
                static_cast<long long>(differing_rows(got, ref, within, n)),
                static_cast<long long>(std::accumulate(within.begin(), within.end(), std::int64_t{0})));
  }

  // One strided-batched call: column-major C' [n, B] = W' [k, n]ᵀ · A' [k, B], batch E.
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t lw = nullptr, la = nullptr, lc = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  const cublasOperation_t t = CUBLAS_OP_T, none = CUBLAS_OP_N;
  const std::int32_t batch = static_cast<std::int32_t>(experts);
  const std::int64_t stride_w = n * k, stride_a = batch_rows * k, stride_c = batch_rows * n;
  const std::uint32_t no_split = CUBLASLT_REDUCTION_SCHEME_NONE;
  const std::uint64_t ws = cu::gemm_workspace_bytes;
  bool fine = ok(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "desc") &&
              ok(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)), "transa") &&
              ok(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &none, sizeof(none)), "transb") &&
              ok(cublasLtMatrixLayoutCreate(&lw, CUDA_R_16BF, static_cast<std::uint64_t>(k), static_cast<std::uint64_t>(n), k), "w") &&
              ok(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, static_cast<std::uint64_t>(k), static_cast<std::uint64_t>(batch_rows), k), "a") &&
              ok(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, static_cast<std::uint64_t>(n), static_cast<std::uint64_t>(batch_rows), n), "c");
  for (auto [layout, stride] : {std::pair{lw, stride_w}, std::pair{la, stride_a}, std::pair{lc, stride_c}})
    fine = fine && ok(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof(batch)), "batch") &&
           ok(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)), "stride");
  fine = fine && ok(cublasLtMatmulPreferenceCreate(&pref), "preference") &&
         ok(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)), "workspace") &&
         ok(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &no_split, sizeof(no_split)),
            "reduction");
  cublasLtMatmulHeuristicResult_t found[16];
  int count = 0;
  if (fine) {  // NOT_SUPPORTED: no algorithm for the call (reported below), not an error
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle, op, lw, la, lc, lc, pref, 16, found, &count);
    if (st == CUBLAS_STATUS_NOT_SUPPORTED) count = 0;
    else fine = ok(st, "heuristic");
  }
  const float alpha = 1.f, beta = 0.f;
  for (int i = 0; fine && i < count; ++i) {
    if (found[i].state != CUBLAS_STATUS_SUCCESS) continue;
    const cublasLtMatmulAlgo_t* algo = &found[i].algo;
    const auto run = [&] {
      return ok(cublasLtMatmul(handle, op, &alpha, w.p, lw, a.p, la, &beta, c.p, lc, c.p, lc, algo, workspace, ws, nullptr),
                "batched");
    };
    if (!ok(cudaMemset(c.p, 0, c_count * 2), "memset") || !run() || !ok(cudaDeviceSynchronize(), "batched") || !download(got, c.p)) {
      fine = false;
      break;
    }
    const std::int64_t differ = differing_rows(got, ref, counts, n);
    std::int32_t id = 0, tile = 0, stages = 0;
    std::size_t written = 0;
    cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof(id), &written);
    cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof(tile), &written);
    cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof(stages), &written);
    const std::string label = "batched, heuristic #" + std::to_string(i) + " (algo " + std::to_string(id) + ", tile " +
                              std::to_string(tile) + ", stages " + std::to_string(stages) + ")";
    std::printf("  %-44s %8.3f ms  rows differing: %lld\n", label.c_str(), median_ms(run), static_cast<long long>(differ));
  }
  if (fine && count == 0) std::printf("  batched: cuBLASLt's heuristic offers no algorithm without split-K\n");
  if (pref) cublasLtMatmulPreferenceDestroy(pref);
  for (cublasLtMatrixLayout_t l : {lw, la, lc})
    if (l) cublasLtMatrixLayoutDestroy(l);
  if (op) cublasLtMatmulDescDestroy(op);
  return fine;
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "moe_batched_gemm: needs a CUDA GPU\n");
    return 2;
  }
  cudaDeviceProp prop{};
  if (!ok(cudaGetDeviceProperties(&prop, 0), "device properties") || !ok(cudaSetDevice(0), "cudaSetDevice")) return 1;
  std::printf("moe_batched_gemm on %s: bfloat16, B = %lld rows an expert\n", prop.name, static_cast<long long>(batch_rows));
  tg::workspace scratch(tg::device::cuda(0));
  tg::exec_context ctx;
  ctx.dev = tg::device::cuda(0);
  ctx.scratch = &scratch;
  cublasLtHandle_t handle = nullptr;
  if (!ok(cublasLtCreate(&handle), "cublasLtCreate")) return 1;
  device_array workspace(cu::gemm_workspace_bytes);
  if (!workspace.p) return 1;
  // Rows an expert: 0, B / 2, B and 1 for the first four, then 37·e mod 41 (0 to 40): the small
  // counts a decode step mostly has (256 tokens' 8 slots over 128 experts average 16).
  std::vector<std::int64_t> counts(static_cast<std::size_t>(experts));
  for (std::int64_t e = 0; e < experts; ++e) counts[static_cast<std::size_t>(e)] = e < 3 ? e * batch_rows / 2 : (e * 37) % 41;
  counts[3] = 1;
  const bool fine = probe("gate_up", 2 * inner, hidden, ctx, handle, workspace.p, counts) &&
                    probe("down", hidden, inner, ctx, handle, workspace.p, counts);
  cublasLtDestroy(handle);
  return fine ? 0 : 1;
}
