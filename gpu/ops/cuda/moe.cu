// The MoE experts on CUDA. The (token, slot) pairs are counting-sorted by expert in three
// deterministic passes (per-chunk counts, one block's prefix sums, per-chunk placement in slot
// order, one thread per expert); the per-expert row counts come back to the host (one copy, one
// stream synchronisation) to size one cuBLASLt GEMM per expert and matrix over the gathered rows;
// the gated GELU and its derivative are element-wise kernels over all rows at once; and each
// token adds its K rows in ascending (expert, slot) order, i.e. ascending sorted position: a block
// per token, no scatter-add, no atomics. The forward of a few tokens takes a padded layout instead
// (moe_padded.cu), which needs no host wait in a stream capture.
#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "gpu/core/host_waits.h"
#include "gpu/ops/cuda/cublaslt_gemm.h"
#include "gpu/ops/cuda/device_math.cuh"
#include "gpu/ops/cuda/launch.h"
#include "gpu/ops/cuda/moe.h"
#include "gpu/ops/cuda/moe_experts_common.cuh"
#include "gpu/ops/cuda/moe_padded.h"
#include "gpu/ops/moe.h"
#include "gpu/ops/op_check.h"
#include "gpu/ops/scratch.h"

namespace tandem::gpu::ops::cuda {
namespace {

using namespace moe_detail;

constexpr int warps_per_block = 8;

// ---------------------------------------------------------------------------------------------
// kernels

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

// ---------------------------------------------------------------------------------------------
// launchers' shared steps

/// The slots sorted by expert, on the device, and the per-expert offsets on the host.
struct routing {
  std::int64_t* sorted = nullptr;    // [N K] slots in (expert, slot) order
  std::int64_t* position = nullptr;  // [N K] where each slot went
  std::vector<std::int64_t> offsets; // [E + 1] on the host
};

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
    TANDEM_RETURN_IF_ERROR(gather<S>(ctx, op, y.as<const S>(), r.sorted, slots, live_rows{}, k, h, ys));
    const S* gate_up_p = gate_up.as<const S>();
    TANDEM_RETURN_IF_ERROR(per_expert(ctx, op, storage_dtype<S>(), dtype::float32, r, lt,
                                      [&](std::int64_t ex, std::int64_t first, std::int64_t rows) {
                                        // gu [rows, 2 Im] = y_e [rows, H] · gate_up[e]ᵀ
                                        return token_rows(rows, 2 * im, h, ys + first * h, gate_up_p + ex * 2 * im * h,
                                                          true, gu + first * 2 * im);
                                      }));
    gated_gelu_kernel<S><<<blocks_for(slots * im, 256), 256, 0, stream_of(ctx)>>>(gu, slots, live_rows{}, im, a);
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

}  // namespace

// ---------------------------------------------------------------------------------------------
// launchers

status moe_experts_forward(const exec_context& ctx, dtype storage, const tensor& y, const tensor& gate_up,
                           const tensor& down, const tensor& weights, const tensor& indices, const tensor& out) {
  constexpr const char* op = "moe_experts_forward";
  TANDEM_RETURN_IF_ERROR(use_device(ctx));
  if (y.dim(0) == 0) return status::ok();
  if (y.dim(0) <= moe_capturable_tokens) {  // the padded layout, unless a token lists an expert twice
    auto padded = moe_padded_forward(ctx, storage, y, gate_up, down, weights, indices, out);
    if (!padded) return padded.error();
    if (*padded) return status::ok();
  }
  std::size_t combine_bytes = 0;
  TANDEM_RETURN_IF_ERROR(combine_shared(op, weights.dim(1), combine_bytes));
  return with_storage(storage, op, [&](auto zero) -> status {
    using S = decltype(zero);
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
