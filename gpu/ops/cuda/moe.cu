// The MoE experts on CUDA. The (token, slot) pairs are counting-sorted by expert in three
// deterministic passes (per-chunk counts, one block's prefix sums, per-chunk placement in slot
// order, one thread per expert); the per-expert row counts come back to the host (one copy, one
// stream synchronisation) to size one cuBLASLt GEMM per expert and matrix over the gathered rows;
// the gated GELU and its derivative are element-wise kernels over all rows at once; and each
// token adds its K rows in ascending (expert, slot) order, i.e. ascending sorted position: a block
// per token, no scatter-add, no atomics.
#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "gpu/core/host_waits.h"
#include "gpu/ops/cuda/captured_branch.h"
#include "gpu/ops/cuda/cublaslt_gemm.h"
#include "gpu/ops/cuda/device_math.cuh"
#include "gpu/ops/cuda/launch.h"
#include "gpu/ops/cuda/moe.h"
#include "gpu/ops/cuda/moe_common.cuh"
#include "gpu/ops/moe.h"
#include "gpu/ops/op_check.h"
#include "gpu/ops/scratch.h"

namespace tandem::gpu::ops::cuda {
namespace {

using moe_detail::chunk_slots;
using moe_detail::scratch_plan;

constexpr int row_threads = 256;
constexpr int warps_per_block = 8;

// ---------------------------------------------------------------------------------------------
// kernels

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

/// Block c: each of its slots routed to e goes to sorted[summary[e] + counts[c, e] + (its rank
/// among the chunk's slots of e)], and position[slot] remembers where (slots in ascending order).
__global__ void __launch_bounds__(chunk_slots)
    chunk_place_kernel(const std::int32_t* __restrict__ indices, std::int64_t slots, std::int64_t e,
                       const std::int64_t* __restrict__ counts, const std::int64_t* __restrict__ summary,
                       std::int64_t* __restrict__ sorted, std::int64_t* __restrict__ position) {
  __shared__ std::int32_t chunk[chunk_slots];
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * chunk_slots;
  chunk[threadIdx.x] = first + threadIdx.x < slots ? indices[first + threadIdx.x] : -1;
  __syncthreads();
  for (std::int64_t ex = threadIdx.x; ex < e; ex += blockDim.x) {
    std::int64_t at = summary[ex] + counts[static_cast<std::int64_t>(blockIdx.x) * e + ex];
    for (int j = 0; j < chunk_slots; ++j)
      if (chunk[j] == ex) {
        sorted[at] = first + j;
        position[first + j] = at;
        ++at;
      }
  }
}

/// Row j of rows [count, h] = y[sorted[j] / K] (W: the copy's word, S or a 16-byte vector).
template <class W>
__global__ void gather_rows_kernel(const W* __restrict__ y, const std::int64_t* __restrict__ sorted, std::int64_t count,
                                   std::int64_t k, std::int64_t words, W* __restrict__ rows) {
  for (std::int64_t j = blockIdx.x; j < count; j += gridDim.x) {
    const W* src = y + (sorted[j] / k) * words;
    W* dst = rows + j * words;
    for (std::int64_t i = threadIdx.x; i < words; i += blockDim.x) dst[i] = src[i];
  }
}

/// Row j of d_o [count, h] = weights[slot] · dout[slot / K], slot = sorted[j].
template <class S>
__global__ void gather_scaled_kernel(const S* __restrict__ dout, const S* __restrict__ weights,
                                     const std::int64_t* __restrict__ sorted, std::int64_t count, std::int64_t k,
                                     std::int64_t h, S* __restrict__ rows) {
  for (std::int64_t j = blockIdx.x; j < count; j += gridDim.x) {
    const std::int64_t slot = sorted[j];
    const float w = to_float(weights[slot]);
    const S* src = dout + (slot / k) * h;
    S* dst = rows + j * h;
    for (std::int64_t i = threadIdx.x; i < h; i += blockDim.x) dst[i] = from_float<S>(w * to_float(src[i]));
  }
}

/// a [count, Im] = gelu_tanh(gate) ⊙ up from gu [count, 2 Im] = [gate | up].
template <class S>
__global__ void gated_gelu_kernel(const float* __restrict__ gu, std::int64_t count, std::int64_t im, S* __restrict__ a) {
  const std::int64_t n = count * im, stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t q = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; q < n; q += stride) {
    const std::int64_t j = q / im, i = q - j * im;
    a[q] = from_float<S>(gelu_tanh(gu[j * 2 * im + i]) * gu[j * 2 * im + im + i]);
  }
}

/// d_gu [count, 2 Im]: d gate = da ⊙ up ⊙ gelu'(gate), d up = da ⊙ gelu(gate).
template <class S>
__global__ void gated_gelu_backward_kernel(const float* __restrict__ gu, const float* __restrict__ da,
                                           std::int64_t count, std::int64_t im, S* __restrict__ dgu) {
  const std::int64_t n = count * im, stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t q = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; q < n; q += stride) {
    const std::int64_t j = q / im, i = q - j * im;
    const float g = gu[j * 2 * im + i], u = gu[j * 2 * im + im + i], d = da[q];
    dgu[j * 2 * im + i] = from_float<S>(d * u * gelu_tanh_derivative(g));
    dgu[j * 2 * im + im + i] = from_float<S>(d * gelu_tanh(g));
  }
}

/// Warp per row j: dweights[slot] = dout[slot / K] · o[j] (lane partial sums, the warp tree).
template <class S>
__global__ void slot_dot_kernel(const S* __restrict__ dout, const float* __restrict__ o,
                                const std::int64_t* __restrict__ sorted, std::int64_t count, std::int64_t k,
                                std::int64_t h, S* __restrict__ dweights) {
  const int lane = threadIdx.x & 31;
  const std::int64_t j = static_cast<std::int64_t>(blockIdx.x) * warps_per_block + (threadIdx.x >> 5);
  if (j >= count) return;
  const std::int64_t slot = sorted[j];
  const S* d = dout + (slot / k) * h;
  const float* r = o + j * h;
  float acc = 0.f;
  for (std::int64_t i = lane; i < h; i += 32) acc += to_float(d[i]) * r[i];
  acc = warp_sum(acc);
  if (lane == 0) dweights[slot] = from_float<S>(acc);
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

/// The padded layout's placement (block c over its chunk of slots): a slot routed to e goes to row
/// e·pad + (its rank among e's slots), sorted[that row] = the slot, position[slot] = the row; a
/// slot of rank >= pad or with an index outside [0, E) gets position -1 (not placed). counts as
/// chunk_offsets_kernel left them.
__global__ void __launch_bounds__(chunk_slots)
    padded_place_kernel(const std::int32_t* __restrict__ indices, std::int64_t slots, std::int64_t e,
                        const std::int64_t* __restrict__ counts, std::int64_t pad, std::int64_t* __restrict__ sorted,
                        std::int64_t* __restrict__ position) {
  __shared__ std::int32_t chunk[chunk_slots];
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * chunk_slots, s = first + threadIdx.x;
  const std::int32_t index = s < slots ? indices[s] : -1;
  chunk[threadIdx.x] = s < slots ? index : -1;
  if (s < slots && (index < 0 || index >= e)) position[s] = -1;
  __syncthreads();
  for (std::int64_t ex = threadIdx.x; ex < e; ex += blockDim.x) {
    std::int64_t rank = counts[static_cast<std::int64_t>(blockIdx.x) * e + ex];
    for (int j = 0; j < chunk_slots; ++j)
      if (chunk[j] == ex) {
        if (rank < pad) {
          sorted[ex * pad + rank] = first + j;
          position[first + j] = ex * pad + rank;
        } else {
          position[first + j] = -1;
        }
        ++rank;
      }
  }
}

/// Row j = e·pad + r of rows [E·pad, h] = y[sorted[j] / K] for r < totals[e]; rows past an
/// expert's count are left as they are (computed on, never read). W as gather_rows_kernel's.
template <class W>
__global__ void padded_gather_kernel(const W* __restrict__ y, const std::int64_t* __restrict__ sorted,
                                     const std::int64_t* __restrict__ totals, std::int64_t e, std::int64_t pad,
                                     std::int64_t k, std::int64_t words, W* __restrict__ rows) {
  for (std::int64_t j = blockIdx.x; j < e * pad; j += gridDim.x) {
    if (j % pad >= totals[j / pad]) continue;
    const W* src = y + (sorted[j] / k) * words;
    W* dst = rows + j * words;
    for (std::int64_t i = threadIdx.x; i < words; i += blockDim.x) dst[i] = src[i];
  }
}

/// gated_gelu_kernel over the padded layout's live rows (r < totals[e] of row e·pad + r).
template <class S>
__global__ void padded_gated_gelu_kernel(const float* __restrict__ gu, const std::int64_t* __restrict__ totals,
                                         std::int64_t e, std::int64_t pad, std::int64_t im, S* __restrict__ a) {
  const std::int64_t n = e * pad * im, stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t q = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; q < n; q += stride) {
    const std::int64_t j = q / im, i = q - j * im;
    if (j % pad >= totals[j / pad]) continue;
    a[q] = from_float<S>(gelu_tanh(gu[j * 2 * im + i]) * gu[j * 2 * im + im + i]);
  }
}

/// One block: the condition of a captured branch, 1 when some expert has more than pad rows.
__global__ void choose_pad_kernel(const std::int64_t* __restrict__ totals, std::int64_t e, std::int64_t pad,
                                  cudaGraphConditionalHandle handle) {
  bool over = false;
  for (std::int64_t ex = threadIdx.x; ex < e; ex += blockDim.x) over = over || totals[ex] > pad;
  over = __syncthreads_or(over);
  if (threadIdx.x == 0) cudaGraphSetConditional(handle, over ? 1u : 0u);
}

// ---------------------------------------------------------------------------------------------
// launchers' shared steps

unsigned row_blocks(std::int64_t rows) { return static_cast<unsigned>(std::clamp<std::int64_t>(rows, 1, 65535)); }

/// The slots sorted by expert, on the device, and the per-expert offsets on the host.
struct routing {
  std::int64_t* sorted = nullptr;    // [N K] slots in (expert, slot) order
  std::int64_t* position = nullptr;  // [N K] where each slot went
  std::vector<std::int64_t> offsets; // [E + 1] on the host
};

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

/// Counting sort of the slots by expert; reads the offsets (and the out-of-range count) back,
/// synchronising the stream, and refuses an index outside [0, E) before anything is written.
status sort_slots(const exec_context& ctx, const char* op, const tensor& indices, std::int64_t e,
                  const sort_scratch& s, routing& r) {
  const cudaStream_t stream = stream_of(ctx);
  const std::int64_t slots = indices.numel(), chunks = (slots + chunk_slots - 1) / chunk_slots;
  TANDEM_RETURN_IF_ERROR(count_slots(ctx, op, indices, e, s));
  auto offsets = read_offsets(ctx, op, slots, e, s);
  if (!offsets) return offsets.error();
  r.offsets = std::move(*offsets);
  chunk_place_kernel<<<static_cast<unsigned>(chunks), chunk_slots, 0, stream>>>(
      indices.as<const std::int32_t>(), slots, e, s.counts, s.summary, r.sorted, r.position);
  return launch_status(op, "chunk_place_kernel");
}

/// rows [count, H] = y [N, H] gathered by sorted slot, in 16-byte words when rows allow.
template <class S>
status gather(const exec_context& ctx, const char* op, const S* y, const std::int64_t* sorted, std::int64_t count,
              std::int64_t k, std::int64_t h, S* rows) {
  const cudaStream_t stream = stream_of(ctx);
  const bool wide = (h * static_cast<std::int64_t>(sizeof(S))) % 16 == 0 && reinterpret_cast<std::uintptr_t>(y) % 16 == 0 &&
                    reinterpret_cast<std::uintptr_t>(rows) % 16 == 0;
  if (wide) {
    const std::int64_t words = h * static_cast<std::int64_t>(sizeof(S)) / 16;
    gather_rows_kernel<uint4><<<row_blocks(count), 128, 0, stream>>>(reinterpret_cast<const uint4*>(y), sorted, count,
                                                                     k, words, reinterpret_cast<uint4*>(rows));
  } else {
    gather_rows_kernel<S><<<row_blocks(count), 128, 0, stream>>>(y, sorted, count, k, h, rows);
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

/// An expert's weight gradient from its token rows: C [m, n] += Aᵀ [m, rows] · B [rows, n], A and
/// B contiguous.
gemm_operands weight_gradient(std::int64_t rows, std::int64_t m, std::int64_t n, const void* a, const void* b, void* c) {
  gemm_operands g;
  g.transpose_a = true;
  g.m = m, g.n = n, g.k = rows;
  g.a = a, g.lda = m;
  g.b = b, g.ldb = n;
  g.c = c, g.ldc = n;
  g.accumulate = true;
  return g;
}

/// One GEMM per expert with rows: `make(expert, first_row, rows)` fills the operands.
template <class Make>
status per_expert(const exec_context& ctx, const char* op, dtype ab, dtype c_type, const routing& r, void* lt,
                  Make&& make) {
  for (std::size_t ex = 0; ex + 1 < r.offsets.size(); ++ex) {
    const std::int64_t first = r.offsets[ex], rows = r.offsets[ex + 1] - first;
    if (rows == 0) continue;
    TANDEM_RETURN_IF_ERROR(gemm(ctx, op, ab, c_type, make(static_cast<std::int64_t>(ex), first, rows), lt));
  }
  return status::ok();
}

template <class S>
constexpr dtype storage_dtype() {
  return std::is_same_v<S, float> ? dtype::float32 : dtype::bfloat16;
}

/// What the forward and the backward both compute first, in scratch: the slots sorted by expert,
/// y's rows gathered in that order, gu = ys · gate_up[e]ᵀ per expert (float32) and
/// a = gelu_tanh(gate) ⊙ up (storage). carve() takes their scratch; front() fills it.
template <class S>
struct expert_rows {
  std::int64_t n = 0, h = 0, e = 0, im = 0, k = 0, slots = 0, chunks = 0;
  std::byte* lt = nullptr;  // cuBLASLt workspace
  sort_scratch ss;
  routing r;
  S *ys = nullptr, *a = nullptr;
  float* gu = nullptr;

  expert_rows(const tensor& y, const tensor& gate_up, const tensor& weights)
      : n(y.dim(0)), h(y.dim(1)), e(gate_up.dim(0)), im(gate_up.dim(1) / 2), k(weights.dim(1)), slots(n * k),
        chunks((slots + chunk_slots - 1) / chunk_slots) {}

  void carve(scratch_plan& s) {
    lt = s.take<std::byte>(gemm_workspace_bytes);
    ss.carve(s, chunks, e);
    r.sorted = s.take<std::int64_t>(slots);
    r.position = s.take<std::int64_t>(slots);
    ys = s.take<S>(slots * h);
    gu = s.take<float>(slots * 2 * im);
    a = s.take<S>(slots * im);
  }

  status front(const exec_context& ctx, const char* op, const tensor& y, const tensor& gate_up, const tensor& indices) {
    TANDEM_RETURN_IF_ERROR(sort_slots(ctx, op, indices, e, ss, r));
    TANDEM_RETURN_IF_ERROR(gather<S>(ctx, op, y.as<const S>(), r.sorted, slots, k, h, ys));
    const S* gate_up_p = gate_up.as<const S>();
    TANDEM_RETURN_IF_ERROR(per_expert(ctx, op, storage_dtype<S>(), dtype::float32, r, lt,
                                      [&](std::int64_t ex, std::int64_t first, std::int64_t rows) {
                                        // gu [rows, 2 Im] = y_e [rows, H] · gate_up[e]ᵀ
                                        return token_rows(rows, 2 * im, h, ys + first * h, gate_up_p + ex * 2 * im * h,
                                                          true, gu + first * 2 * im);
                                      }));
    gated_gelu_kernel<S><<<blocks_for(slots * im, 256), 256, 0, stream_of(ctx)>>>(gu, slots, im, a);
    return launch_status(op, "gated_gelu_kernel");
  }

  /// o [slots, H] = a · down[e]ᵀ per expert (float32), rows in sorted order.
  status down(const exec_context& ctx, const char* op, const tensor& down_proj, float* o) const {
    const S* down_p = down_proj.as<const S>();
    return per_expert(ctx, op, storage_dtype<S>(), dtype::float32, r, lt,
                      [&](std::int64_t ex, std::int64_t first, std::int64_t rows) {
                        // o [rows, H] = a [rows, Im] · down[e]ᵀ
                        return token_rows(rows, h, im, a + first * im, down_p + ex * h * im, true, o + first * h);
                      });
  }
};

// ---------------------------------------------------------------------------------------------
// The padded layout: the forward of a few tokens (a decode step's) with no host wait, so that it
// can be captured. Expert e's rows sit at e·pad .. e·pad + count_e of [E·pad, ...] buffers; the
// products run over all E·pad rows in one batched row-invariant call per matrix (cublaslt_gemm.h),
// so a real row gets the bits the per-expert call with M = count_e gives it, and rows past a count
// are computed and never read. The pad is padded_rows(N, K, E) when every expert's count fits it,
// else N (a token takes an expert at most once). Outside a capture the counts are read back (one
// host wait, as the sorted layout's) to pick the pad and refuse an index outside [0, E); in a
// capture a kernel picks it on the device and an if/else conditional node runs the products at
// that pad (captured_branch.h), the indices trusted as the router wrote them (one outside [0, E)
// adds nothing to its token; the uncaptured run of the same step refuses it).

/// The rows an expert is given in the common case: twice the mean count of a router that spreads
/// the N·K slots evenly over E experts, at least 64, rounded up to a power of two, at most N. At
/// 256 tokens of the 26B-A4B shape (K 8, E 128) it is 64: counts average 16 (standard deviation
/// about 4), so a count past 64 needs a router skewed well beyond an even one.
std::int64_t padded_rows(std::int64_t n, std::int64_t k, std::int64_t e) {
  const std::int64_t twice_mean = (2 * n * k + e - 1) / e;
  std::int64_t pad = 64;
  while (pad < twice_mean) pad *= 2;
  return std::min(pad, n);
}

template <class S>
struct padded_experts {
  std::int64_t n = 0, h = 0, e = 0, im = 0, k = 0, slots = 0, chunks = 0, small_pad = 0;
  std::byte* lt = nullptr;
  sort_scratch ss;
  std::int64_t *sorted = nullptr, *position = nullptr;  // [E·N] slots by row, [N K] rows by slot
  S *ys = nullptr, *a = nullptr;                         // [E·N, H], [E·N, Im]
  float *gu = nullptr, *o = nullptr;                     // [E·N, 2 Im], [E·N, H]

  padded_experts(const tensor& y, const tensor& gate_up, const tensor& weights)
      : n(y.dim(0)), h(y.dim(1)), e(gate_up.dim(0)), im(gate_up.dim(1) / 2), k(weights.dim(1)), slots(n * k),
        chunks((slots + chunk_slots - 1) / chunk_slots), small_pad(padded_rows(n, k, e)) {}

  /// Buffers for the larger pad, N: both pads use the same ones.
  void carve(scratch_plan& s) {
    lt = s.take<std::byte>(gemm_workspace_bytes);
    ss.carve(s, chunks, e);
    sorted = s.take<std::int64_t>(e * n);
    position = s.take<std::int64_t>(slots);
    ys = s.take<S>(e * n * h);
    gu = s.take<float>(e * n * 2 * im);
    a = s.take<S>(e * n * im);
    o = s.take<float>(e * n * h);
  }

  /// gu = ys · gate_up[e]ᵀ and o = a · down[e]ᵀ over every expert's `pad` rows.
  gemm_operands gate_up_product(std::int64_t pad, const S* gate_up) const {
    gemm_operands g = token_rows(pad, 2 * im, h, ys, gate_up, true, gu);
    g.batch = e, g.stride_a = pad * h, g.stride_b = 2 * im * h, g.stride_c = pad * 2 * im;
    return g;
  }
  gemm_operands down_product(std::int64_t pad, const S* down) const {
    gemm_operands g = token_rows(pad, h, im, a, down, true, o);
    g.batch = e, g.stride_a = pad * im, g.stride_b = h * im, g.stride_c = pad * h;
    return g;
  }

  /// Makes both pads' products' choices (a host wait each, the first time), so that a capture
  /// may run either (as expert_product runs them).
  status prepare(const exec_context& ctx, const char* op, const S* gate_up, const S* down) const {
    for (const std::int64_t pad : {small_pad, n})
      for (const gemm_operands& g : {gate_up_product(pad, gate_up), down_product(pad, down)}) {
        const status batched = gemm_prepare(ctx, op, storage_dtype<S>(), dtype::float32, g, lt);
        if (batched.code() != status_code::unsupported) TANDEM_RETURN_IF_ERROR(batched);
        else TANDEM_RETURN_IF_ERROR(gemm_prepare(ctx, op, storage_dtype<S>(), dtype::float32, expert(g, 0), lt));
      }
    return status::ok();
  }

  /// Everything after the counts at `pad` rows an expert: placement, gather, the two products
  /// with the gated GELU between, and each token's sum of its K rows into out.
  status run(const exec_context& ctx, const char* op, std::int64_t pad, const tensor& y, const tensor& gate_up,
             const tensor& down, const tensor& weights, const tensor& indices, const tensor& out,
             std::size_t combine_bytes) const {
    const cudaStream_t stream = stream_of(ctx);
    padded_place_kernel<<<static_cast<unsigned>(chunks), chunk_slots, 0, stream>>>(
        indices.as<const std::int32_t>(), slots, e, ss.counts, pad, sorted, position);
    TANDEM_RETURN_IF_ERROR(launch_status(op, "padded_place_kernel"));
    const std::int64_t rows = e * pad;
    const bool wide = (h * static_cast<std::int64_t>(sizeof(S))) % 16 == 0 && aligned16(y.data()) && aligned16(ys);
    if (wide)
      padded_gather_kernel<uint4><<<row_blocks(rows), 128, 0, stream>>>(
          reinterpret_cast<const uint4*>(y.data()), sorted, ss.totals, e, pad, k,
          h * static_cast<std::int64_t>(sizeof(S)) / 16, reinterpret_cast<uint4*>(ys));
    else
      padded_gather_kernel<S><<<row_blocks(rows), 128, 0, stream>>>(y.as<const S>(), sorted, ss.totals, e, pad, k, h, ys);
    TANDEM_RETURN_IF_ERROR(launch_status(op, "padded_gather_kernel"));
    TANDEM_RETURN_IF_ERROR(expert_product(ctx, op, gate_up_product(pad, gate_up.as<const S>())));
    padded_gated_gelu_kernel<S><<<blocks_for(rows * im, 256), 256, 0, stream>>>(gu, ss.totals, e, pad, im, a);
    TANDEM_RETURN_IF_ERROR(launch_status(op, "padded_gated_gelu_kernel"));
    TANDEM_RETURN_IF_ERROR(expert_product(ctx, op, down_product(pad, down.as<const S>())));
    combine_kernel<S><<<static_cast<unsigned>(n), row_threads, combine_bytes, stream>>>(
        o, position, weights.as<const S>(), k, h, out.as<S>(), false);
    return launch_status(op, "combine_kernel");
  }

 private:
  static bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

  /// One batched call; where cuBLASLt cannot run the single product's algorithm batched (operands
  /// whose alignment it cannot keep across the batch), one call per expert with the same
  /// algorithm: the same bits either way.
  status expert_product(const exec_context& ctx, const char* op, const gemm_operands& g) const {
    const status batched = gemm(ctx, op, storage_dtype<S>(), dtype::float32, g, lt);
    if (batched.code() != status_code::unsupported) return batched;
    for (std::int64_t ex = 0; ex < g.batch; ++ex)
      TANDEM_RETURN_IF_ERROR(gemm(ctx, op, storage_dtype<S>(), dtype::float32, expert(g, ex), lt));
    return status::ok();
  }

  /// Batch `ex` of a batched product, alone.
  static gemm_operands expert(const gemm_operands& g, std::int64_t ex) {
    gemm_operands one = g;
    one.batch = 1;
    one.a = static_cast<const S*>(g.a) + ex * g.stride_a;
    one.b = static_cast<const S*>(g.b) + ex * g.stride_b;
    one.c = static_cast<float*>(g.c) + ex * g.stride_c;
    return one;
  }
};

/// The forward over the padded layout (see above).
template <class S>
status padded_forward(const exec_context& ctx, const char* op, const tensor& y, const tensor& gate_up, const tensor& down,
                      const tensor& weights, const tensor& indices, const tensor& out, std::size_t combine_bytes) {
  padded_experts<S> x(y, gate_up, weights);
  scratch_plan sizing;
  x.carve(sizing);
  auto scratch = op_scratch::get(ctx, op, sizing.bytes());
  if (!scratch) return scratch.error();
  scratch_plan plan(scratch->data());
  x.carve(plan);
  TANDEM_RETURN_IF_ERROR(count_slots(ctx, op, indices, x.e, x.ss));
  const auto at = [&](std::int64_t pad) {
    return [&, pad](const exec_context& c) { return x.run(c, op, pad, y, gate_up, down, weights, indices, out, combine_bytes); };
  };
  auto captured = capturing(ctx);
  if (!captured) return captured.error();
  if (*captured) {
    if (x.small_pad == x.n) return at(x.n)(ctx);
    return capture_branch(
        ctx, op,
        [&](cudaGraphConditionalHandle handle) {
          choose_pad_kernel<<<1, 256, 0, stream_of(ctx)>>>(x.ss.totals, x.e, x.small_pad, handle);
          return launch_status(op, "choose_pad_kernel");
        },
        at(x.n), at(x.small_pad));
  }
  auto offsets = read_offsets(ctx, op, x.slots, x.e, x.ss);
  if (!offsets) return offsets.error();
  std::int64_t largest = 0;
  for (std::size_t ex = 0; ex + 1 < offsets->size(); ++ex) largest = std::max(largest, (*offsets)[ex + 1] - (*offsets)[ex]);
  TANDEM_RETURN_IF_ERROR(x.prepare(ctx, op, gate_up.as<const S>(), down.as<const S>()));
  return at(largest <= x.small_pad ? x.small_pad : x.n)(ctx);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// launchers

status moe_experts_forward(const exec_context& ctx, dtype storage, const tensor& y, const tensor& gate_up,
                           const tensor& down, const tensor& weights, const tensor& indices, const tensor& out) {
  constexpr const char* op = "moe_experts_forward";
  TANDEM_RETURN_IF_ERROR(use_device(ctx));
  if (y.dim(0) == 0) return status::ok();
  std::size_t combine_bytes = 0;
  TANDEM_RETURN_IF_ERROR(combine_shared(op, weights.dim(1), combine_bytes));
  return with_storage(storage, op, [&](auto zero) -> status {
    using S = decltype(zero);
    if (y.dim(0) <= moe_capturable_tokens)
      return padded_forward<S>(ctx, op, y, gate_up, down, weights, indices, out, combine_bytes);
    expert_rows<S> x(y, gate_up, weights);
    float* o = nullptr;
    auto carve = [&](scratch_plan& s) {
      x.carve(s);
      o = s.take<float>(x.slots * x.h);
    };
    scratch_plan sizing;
    carve(sizing);
    auto scratch = op_scratch::get(ctx, op, sizing.bytes());
    if (!scratch) return scratch.error();
    scratch_plan plan(scratch->data());
    carve(plan);
    TANDEM_RETURN_IF_ERROR(x.front(ctx, op, y, gate_up, indices));
    TANDEM_RETURN_IF_ERROR(x.down(ctx, op, down, o));
    combine_kernel<S><<<static_cast<unsigned>(x.n), row_threads, combine_bytes, stream_of(ctx)>>>(
        o, x.r.position, weights.as<const S>(), x.k, x.h, out.as<S>(), false);
    return launch_status(op, "combine_kernel");
  });
}

status moe_experts_backward(const exec_context& ctx, dtype storage, const tensor& y, const tensor& gate_up,
                            const tensor& down, const tensor& weights, const tensor& indices, const tensor& dout,
                            const tensor& dy, const tensor& dgate_up, const tensor& ddown, const tensor& dweights,
                            bool accumulate_dy) {
  constexpr const char* op = "moe_experts_backward";
  TANDEM_RETURN_IF_ERROR(use_device(ctx));
  if (y.dim(0) == 0) return status::ok();
  const bool need_do = !ddown.empty() || !dgate_up.empty() || !dy.empty();
  const bool need_dgu = !dgate_up.empty() || !dy.empty();
  if (!need_do && dweights.empty()) return status::ok();
  std::size_t combine_bytes = 0;
  TANDEM_RETURN_IF_ERROR(combine_shared(op, weights.dim(1), combine_bytes));
  return with_storage(storage, op, [&](auto zero) -> status {
    using S = decltype(zero);
    constexpr dtype ab = storage_dtype<S>();
    expert_rows<S> x(y, gate_up, weights);
    const std::int64_t n = x.n, h = x.h, im = x.im, k = x.k, slots = x.slots;
    S *d_o = nullptr, *dgu = nullptr;
    float *rows_h = nullptr, *da = nullptr;  // rows_h: o, then d y per row
    auto carve = [&](scratch_plan& s) {
      x.carve(s);
      if (!dweights.empty() || !dy.empty()) rows_h = s.take<float>(slots * h);
      if (need_do) d_o = s.take<S>(slots * h);
      if (need_dgu) {
        da = s.take<float>(slots * im);
        dgu = s.take<S>(slots * 2 * im);
      }
    };
    scratch_plan sizing;
    carve(sizing);
    auto scratch = op_scratch::get(ctx, op, sizing.bytes());
    if (!scratch) return scratch.error();
    scratch_plan plan(scratch->data());
    carve(plan);
    const cudaStream_t stream = stream_of(ctx);
    const S* gate_up_p = gate_up.as<const S>();
    const S* down_p = down.as<const S>();
    TANDEM_RETURN_IF_ERROR(x.front(ctx, op, y, gate_up, indices));
    if (!dweights.empty()) {  // dweights[slot] = dout[t] · o_e(y[t])
      TANDEM_RETURN_IF_ERROR(x.down(ctx, op, down, rows_h));
      slot_dot_kernel<S><<<static_cast<unsigned>((slots + warps_per_block - 1) / warps_per_block), warps_per_block * 32,
                           0, stream>>>(dout.as<const S>(), rows_h, x.r.sorted, slots, k, h, dweights.as<S>());
      TANDEM_RETURN_IF_ERROR(launch_status(op, "slot_dot_kernel"));
    }
    if (!need_do) return status::ok();
    gather_scaled_kernel<S><<<row_blocks(slots), 128, 0, stream>>>(dout.as<const S>(), weights.as<const S>(), x.r.sorted,
                                                                   slots, k, h, d_o);
    TANDEM_RETURN_IF_ERROR(launch_status(op, "gather_scaled_kernel"));
    if (!ddown.empty()) {
      S* ddown_p = ddown.as<S>();
      TANDEM_RETURN_IF_ERROR(per_expert(ctx, op, ab, ab, x.r, x.lt, [&](std::int64_t ex, std::int64_t first,
                                                                        std::int64_t rows) {
        // ddown[e] [H, Im] += d_oᵀ [H, rows] · a [rows, Im]
        return weight_gradient(rows, h, im, d_o + first * h, x.a + first * im, ddown_p + ex * h * im);
      }));
    }
    if (!need_dgu) return status::ok();
    TANDEM_RETURN_IF_ERROR(per_expert(ctx, op, ab, dtype::float32, x.r, x.lt, [&](std::int64_t ex, std::int64_t first,
                                                                                  std::int64_t rows) {
      // da [rows, Im] = d_o [rows, H] · down[e] [H, Im]
      return token_rows(rows, im, h, d_o + first * h, down_p + ex * h * im, false, da + first * im);
    }));
    gated_gelu_backward_kernel<S><<<blocks_for(slots * im, 256), 256, 0, stream>>>(x.gu, da, slots, im, dgu);
    TANDEM_RETURN_IF_ERROR(launch_status(op, "gated_gelu_backward_kernel"));
    if (!dgate_up.empty()) {
      S* dgate_up_p = dgate_up.as<S>();
      TANDEM_RETURN_IF_ERROR(per_expert(ctx, op, ab, ab, x.r, x.lt, [&](std::int64_t ex, std::int64_t first,
                                                                        std::int64_t rows) {
        // dgate_up[e] [2 Im, H] += d_guᵀ [2 Im, rows] · y_e [rows, H]
        return weight_gradient(rows, 2 * im, h, dgu + first * 2 * im, x.ys + first * h, dgate_up_p + ex * 2 * im * h);
      }));
    }
    if (dy.empty()) return status::ok();
    TANDEM_RETURN_IF_ERROR(per_expert(ctx, op, ab, dtype::float32, x.r, x.lt, [&](std::int64_t ex, std::int64_t first,
                                                                                  std::int64_t rows) {
      // d y_e [rows, H] = d_gu [rows, 2 Im] · gate_up[e] [2 Im, H]
      return token_rows(rows, h, 2 * im, dgu + first * 2 * im, gate_up_p + ex * 2 * im * h, false, rows_h + first * h);
    }));
    combine_kernel<S><<<static_cast<unsigned>(n), row_threads, combine_bytes, stream>>>(
        rows_h, x.r.position, static_cast<const S*>(nullptr), k, h, dy.as<S>(), accumulate_dy);
    return launch_status(op, "combine_kernel");
  });
}

}  // namespace tandem::gpu::ops::cuda
