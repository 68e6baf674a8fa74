// What the CUDA MoE experts' two layouts share (moe.cu: the (token, slot) pairs sorted by expert,
// one GEMM per expert; moe_padded.cu: every expert's rows padded to a fixed count for the forward
// of a few tokens, no host wait in a capture): the sort's counting passes, the combine that adds a
// token's K rows in ascending (expert, slot) order, the gather and the gated GELU over a layout's
// live rows, an expert's row-invariant product. Private to
// those two files (nvcc only); each gets its own copies of the kernels.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "gpu/core/dtype.h"
#include "gpu/core/exec_context.h"
#include "gpu/core/host_waits.h"
#include "gpu/core/status.h"
#include "gpu/core/tensor.h"
#include "gpu/ops/cuda/cublaslt_gemm.h"
#include "gpu/ops/cuda/device_math.cuh"
#include "gpu/ops/cuda/launch.h"
#include "gpu/ops/cuda/moe_common.cuh"
#include "gpu/ops/op_check.h"

namespace tandem::gpu::ops::cuda::moe_detail {
namespace {

constexpr int row_threads = 256;

/// Block c over slots [c · chunk_slots, ...): counts[c, e] = its slots routed to e (one thread per
/// expert over the chunk in shared memory); bad[c] = its slots with an index outside [0, E).
__global__ void __launch_bounds__(chunk_slots)
    chunk_counts_kernel(const std::int32_t* __restrict__ indices, std::int64_t slots, std::int64_t e,
                        std::int64_t* __restrict__ counts, std::int64_t* __restrict__ bad) {
  __shared__ std::int32_t chunk[chunk_slots];
  const std::int64_t s = static_cast<std::int64_t>(blockIdx.x) * chunk_slots + threadIdx.x;
  const std::int32_t index = s < slots ? indices[s] : 0;
  chunk[threadIdx.x] = s < slots ? index : -1;
  const int out_of_range = __syncthreads_count(s < slots && (index < 0 || index >= e));
  if (threadIdx.x == 0) bad[blockIdx.x] = out_of_range;
  for (std::int64_t ex = threadIdx.x; ex < e; ex += blockDim.x) {
    std::int64_t c = 0;
    for (int j = 0; j < chunk_slots; ++j) c += chunk[j] == ex;
    counts[static_cast<std::int64_t>(blockIdx.x) * e + ex] = c;
  }
}

/// One block: counts[c, e] becomes the rows of expert e in chunks before c; summary[0..E] the
/// expert offsets (summary[e + 1] - summary[e] rows for e), summary[E + 1] the bad slots.
__global__ void chunk_offsets_kernel(std::int64_t chunks, std::int64_t e, std::int64_t* __restrict__ counts,
                                     const std::int64_t* __restrict__ bad, std::int64_t* __restrict__ totals,
                                     std::int64_t* __restrict__ summary) {
  for (std::int64_t ex = threadIdx.x; ex < e; ex += blockDim.x) {
    std::int64_t running = 0;
    for (std::int64_t c = 0; c < chunks; ++c) {
      const std::int64_t v = counts[c * e + ex];
      counts[c * e + ex] = running;
      running += v;
    }
    totals[ex] = running;
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  std::int64_t offset = 0;
  summary[0] = 0;
  for (std::int64_t ex = 0; ex < e; ++ex) summary[ex + 1] = (offset += totals[ex]);
  std::int64_t b = 0;
  for (std::int64_t c = 0; c < chunks; ++c) b += bad[c];
  summary[e + 1] = b;
}

/// Block t: dst[t] (= or +=) Σ over its K slots in ascending sorted position of
/// (weights ? weights[slot] : 1) · rows[position[slot]]. Dynamic shared memory: K positions and K
/// slots in that order.
template <class S>
__global__ void combine_kernel(const float* __restrict__ rows, const std::int64_t* __restrict__ position,
                               const S* __restrict__ weights, std::int64_t k, std::int64_t h, S* __restrict__ dst,
                               bool accumulate) {
  extern __shared__ std::int64_t order[];  // [K] positions, then [K] slots
  const std::int64_t t = blockIdx.x;
  for (std::int64_t s = threadIdx.x; s < k; s += blockDim.x) {
    const std::int64_t p = position[t * k + s];
    std::int64_t rank = 0;  // positions are distinct
    for (std::int64_t q = 0; q < k; ++q) rank += position[t * k + q] < p;
    order[rank] = p;
    order[k + rank] = t * k + s;
  }
  __syncthreads();
  S* out = dst + t * h;
  for (std::int64_t i = threadIdx.x; i < h; i += blockDim.x) {
    float acc = accumulate ? to_float(out[i]) : 0.f;
    for (std::int64_t r = 0; r < k; ++r) {
      if (order[r] < 0) continue;  // not placed (padded layout, an index outside [0, E)): adds nothing
      const float v = rows[order[r] * h + i];
      acc += weights ? to_float(weights[order[k + r]]) * v : v;
    }
    out[i] = from_float<S>(acc);
  }
}

unsigned row_blocks(std::int64_t rows) { return static_cast<unsigned>(std::clamp<std::int64_t>(rows, 1, 65535)); }

/// Which rows of a layout hold a slot: every row of the sorted layout (totals null), rows e·pad + r
/// with r < totals[e] of the padded one (the rest are computed on and never read).
struct live_rows {
  const std::int64_t* totals = nullptr;
  std::int64_t pad = 1;
  __device__ bool operator()(std::int64_t j) const { return !totals || j % pad < totals[j / pad]; }
};

/// Live row j of rows [count, h] = y[sorted[j] / K] (W: the copy's word, S or a 16-byte vector).
template <class W>
__global__ void gather_rows_kernel(const W* __restrict__ y, const std::int64_t* __restrict__ sorted, std::int64_t count,
                                   live_rows live, std::int64_t k, std::int64_t words, W* __restrict__ rows) {
  for (std::int64_t j = blockIdx.x; j < count; j += gridDim.x) {
    if (!live(j)) continue;
    const W* src = y + (sorted[j] / k) * words;
    W* dst = rows + j * words;
    for (std::int64_t i = threadIdx.x; i < words; i += blockDim.x) dst[i] = src[i];
  }
}

/// Live rows of a [count, Im] = gelu_tanh(gate) ⊙ up from gu [count, 2 Im] = [gate | up].
template <class S>
__global__ void gated_gelu_kernel(const float* __restrict__ gu, std::int64_t count, live_rows live, std::int64_t im,
                                  S* __restrict__ a) {
  const std::int64_t n = count * im, stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t q = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; q < n; q += stride) {
    const std::int64_t j = q / im, i = q - j * im;
    if (!live(j)) continue;
    a[q] = from_float<S>(gelu_tanh(gu[j * 2 * im + i]) * gu[j * 2 * im + im + i]);
  }
}

/// Scratch of the sort: counts [chunks, E], bad [chunks], totals [E], summary [E + 2].
struct sort_scratch {
  std::int64_t *counts = nullptr, *bad = nullptr, *totals = nullptr, *summary = nullptr;
  void carve(scratch_plan& s, std::int64_t chunks, std::int64_t e) {
    counts = s.take<std::int64_t>(chunks * e);
    bad = s.take<std::int64_t>(chunks);
    totals = s.take<std::int64_t>(e);
    summary = s.take<std::int64_t>(e + 2);
  }
};

/// The sort's first passes, on the device: per-chunk counts, then their prefix sums per expert
/// (s.counts), the experts' rows (s.totals) and s.summary (offsets, then the out-of-range count).
status count_slots(const exec_context& ctx, const char* op, const tensor& indices, std::int64_t e,
                   const sort_scratch& s) {
  const cudaStream_t stream = stream_of(ctx);
  const std::int64_t slots = indices.numel(), chunks = (slots + chunk_slots - 1) / chunk_slots;
  chunk_counts_kernel<<<static_cast<unsigned>(chunks), chunk_slots, 0, stream>>>(indices.as<const std::int32_t>(),
                                                                                 slots, e, s.counts, s.bad);
  TANDEM_RETURN_IF_ERROR(launch_status(op, "chunk_counts_kernel"));
  chunk_offsets_kernel<<<1, 1024, 0, stream>>>(chunks, e, s.counts, s.bad, s.totals, s.summary);
  return launch_status(op, "chunk_offsets_kernel");
}

/// count_slots' summary read back (a host wait); an index outside [0, E) refused. The expert
/// offsets [E + 1] on success.
result<std::vector<std::int64_t>> read_offsets(const exec_context& ctx, const char* op, std::int64_t slots,
                                               std::int64_t e, const sort_scratch& s) {
  std::vector<std::int64_t> summary(static_cast<std::size_t>(e + 2));
  {  // the wait covers the copy: into pageable memory it returns once done
    const host_wait waiting;
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(summary.data(), s.summary, summary.size() * sizeof(std::int64_t),
                                      cudaMemcpyDeviceToHost, stream_of(ctx)));
    TANDEM_CUDA_CHECK(cudaStreamSynchronize(stream_of(ctx)));
  }
  if (summary.back() != 0)
    return require(false, op,
                   "indices: " + std::to_string(summary.back()) + " of " + std::to_string(slots) +
                       " values are out of range [0, " + std::to_string(e) + ")");
  summary.pop_back();
  return summary;
}

/// The live rows of rows [count, H] = y [N, H] gathered by slot, in 16-byte words when rows allow.
template <class S>
status gather(const exec_context& ctx, const char* op, const S* y, const std::int64_t* sorted, std::int64_t count,
              live_rows live, std::int64_t k, std::int64_t h, S* rows) {
  const cudaStream_t stream = stream_of(ctx);
  const bool wide = (h * static_cast<std::int64_t>(sizeof(S))) % 16 == 0 && reinterpret_cast<std::uintptr_t>(y) % 16 == 0 &&
                    reinterpret_cast<std::uintptr_t>(rows) % 16 == 0;
  if (wide) {
    const std::int64_t words = h * static_cast<std::int64_t>(sizeof(S)) / 16;
    gather_rows_kernel<uint4><<<row_blocks(count), 128, 0, stream>>>(reinterpret_cast<const uint4*>(y), sorted, count,
                                                                     live, k, words, reinterpret_cast<uint4*>(rows));
  } else {
    gather_rows_kernel<S><<<row_blocks(count), 128, 0, stream>>>(y, sorted, count, live, k, h, rows);
  }
  return launch_status(op, "gather_rows_kernel");
}

/// The combine's dynamic shared memory: K positions and K slots.
status combine_shared(const char* op, std::int64_t k, std::size_t& bytes) {
  bytes = static_cast<std::size_t>(2 * k) * sizeof(std::int64_t);
  return require(bytes <= 48 * 1024, op, "top_k K = " + std::to_string(k) + " is above the CUDA backend's 3072");
}

/// An expert's token rows times its weight, row-invariant: C [rows, n] = A [rows, k] · W, W [k, n]
/// or (w_transposed) [n, k] used transposed; A and C contiguous.
gemm_operands token_rows(std::int64_t rows, std::int64_t n, std::int64_t k, const void* a, const void* w, bool w_transposed,
                         void* c) {
  gemm_operands g;
  g.transpose_b = w_transposed;
  g.m = rows, g.n = n, g.k = k;
  g.row_invariant = true;
  g.a = a, g.lda = k;
  g.b = w, g.ldb = w_transposed ? k : n;
  g.c = c, g.ldc = n;
  return g;
}

template <class S>
constexpr dtype storage_dtype() {
  return std::is_same_v<S, float> ? dtype::float32 : dtype::bfloat16;
}

}  // namespace
}  // namespace tandem::gpu::ops::cuda::moe_detail
