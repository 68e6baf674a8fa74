// The MoE experts' forward on CUDA over a padded layout: the forward of a few tokens (a decode
// step's) with no host wait, so that it can be captured. Expert e's rows sit at e·pad .. e·pad +
// count_e of [E·pad, ...] buffers; the products run over all E·pad rows in one batched
// row-invariant call per matrix (cublaslt_gemm.h), so a real row gets the bits the per-expert call
// with M = count_e gives it (moe.cu's sorted layout), and rows past a count are computed and never
// read. The pad is padded_rows(N, K, E) when every expert's count fits it, else N (the most a
// count can be when a token takes an expert at most once, as the router gives them). Outside a
// capture the counts are read back (one host wait, as the sorted layout's) to pick the pad and
// refuse an index outside [0, E); a count past N (a token listing one expert twice, which the
// contract allows) fits no pad, and the forward declines (the caller takes the sorted layout). In a
// capture a kernel picks the pad on the device and an if/else conditional node runs the products
// at that pad (captured_branch.h), the indices trusted as the router wrote them (one outside
// [0, E) adds nothing to its token; the uncaptured run of the same step refuses it).
#include "gpu/ops/cuda/moe_padded.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "gpu/ops/cuda/captured_branch.h"
#include "gpu/ops/cuda/cublaslt_gemm.h"
#include "gpu/ops/cuda/device_math.cuh"
#include "gpu/ops/cuda/launch.h"
#include "gpu/ops/cuda/moe_experts_common.cuh"
#include "gpu/ops/op_check.h"
#include "gpu/ops/scratch.h"

namespace tandem::gpu::ops::cuda {
namespace {

using namespace moe_detail;

// ---------------------------------------------------------------------------------------------
// kernels

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

/// One block: the condition of a captured branch, 1 when some expert has more than pad rows.
__global__ void choose_pad_kernel(const std::int64_t* __restrict__ totals, std::int64_t e, std::int64_t pad,
                                  cudaGraphConditionalHandle handle) {
  bool over = false;
  for (std::int64_t ex = threadIdx.x; ex < e; ex += blockDim.x) over = over || totals[ex] > pad;
  over = __syncthreads_or(over);
  if (threadIdx.x == 0) cudaGraphSetConditional(handle, over ? 1u : 0u);
}

// ---------------------------------------------------------------------------------------------
// launcher's steps

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
    TANDEM_RETURN_IF_ERROR(prepare_at(ctx, op, small_pad, gate_up, down));
    return small_pad == n ? status::ok() : prepare_at(ctx, op, n, gate_up, down);
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
    const live_rows live{ss.totals, pad};
    TANDEM_RETURN_IF_ERROR(gather<S>(ctx, op, y.as<const S>(), sorted, rows, live, k, h, ys));
    TANDEM_RETURN_IF_ERROR(expert_product(ctx, op, gate_up_product(pad, gate_up.as<const S>())));
    gated_gelu_kernel<S><<<blocks_for(rows * im, 256), 256, 0, stream>>>(gu, rows, live, im, a);
    TANDEM_RETURN_IF_ERROR(launch_status(op, "gated_gelu_kernel"));
    TANDEM_RETURN_IF_ERROR(expert_product(ctx, op, down_product(pad, down.as<const S>())));
    combine_kernel<S><<<static_cast<unsigned>(n), row_threads, combine_bytes, stream>>>(
        o, position, weights.as<const S>(), k, h, out.as<S>(), false);
    return launch_status(op, "combine_kernel");
  }

 private:
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

  /// Both products' choices at `pad` rows an expert: batched, else one expert's.
  status prepare_at(const exec_context& ctx, const char* op, std::int64_t pad, const S* gate_up, const S* down) const {
    for (const gemm_operands& g : {gate_up_product(pad, gate_up), down_product(pad, down)}) {
      const status batched = gemm_prepare(ctx, op, storage_dtype<S>(), dtype::float32, g, lt);
      if (batched.code() != status_code::unsupported) TANDEM_RETURN_IF_ERROR(batched);
      else TANDEM_RETURN_IF_ERROR(gemm_prepare(ctx, op, storage_dtype<S>(), dtype::float32, expert(g, 0), lt));
    }
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
result<bool> padded_forward(const exec_context& ctx, const char* op, const tensor& y, const tensor& gate_up, const tensor& down,
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
    if (x.small_pad == x.n) TANDEM_RETURN_IF_ERROR(at(x.n)(ctx));
    else
      TANDEM_RETURN_IF_ERROR(capture_branch(
          ctx, op,
          [&](cudaGraphConditionalHandle handle) {
            choose_pad_kernel<<<1, 256, 0, stream_of(ctx)>>>(x.ss.totals, x.e, x.small_pad, handle);
            return launch_status(op, "choose_pad_kernel");
          },
          at(x.n), at(x.small_pad)));
    return true;
  }
  auto offsets = read_offsets(ctx, op, x.slots, x.e, x.ss);
  if (!offsets) return offsets.error();
  std::int64_t largest = 0;
  for (std::size_t ex = 0; ex + 1 < offsets->size(); ++ex) largest = std::max(largest, (*offsets)[ex + 1] - (*offsets)[ex]);
  if (largest > x.n) return false;  // a token lists an expert twice: no pad holds that expert's rows
  TANDEM_RETURN_IF_ERROR(x.prepare(ctx, op, gate_up.as<const S>(), down.as<const S>()));
  TANDEM_RETURN_IF_ERROR(at(largest <= x.small_pad ? x.small_pad : x.n)(ctx));
  return true;
}

}  // namespace

result<bool> moe_padded_forward(const exec_context& ctx, dtype storage, const tensor& y, const tensor& gate_up,
                                const tensor& down, const tensor& weights, const tensor& indices, const tensor& out) {
  constexpr const char* op = "moe_experts_forward";
  std::size_t combine_bytes = 0;
  TANDEM_RETURN_IF_ERROR(combine_shared(op, weights.dim(1), combine_bytes));
  bool ran = false;
  TANDEM_RETURN_IF_ERROR(with_storage(storage, op, [&](auto zero) -> status {
    using S = decltype(zero);
    auto r = padded_forward<S>(ctx, op, y, gate_up, down, weights, indices, out, combine_bytes);
    if (!r) return r.error();
    ran = *r;
    return status::ok();
  }));
  return ran;
}

}  // namespace tandem::gpu::ops::cuda
