// The MoE router on CUDA, in float32 whatever the storage: a block per token for the scale-less
// norm (the fixed block tree of device_math.cuh), the projection and its gradients as float32
// cuBLASLt GEMMs, a warp per token for softmax, top-k and the dlogits, and the parameter
// gradients' column sums in two deterministic passes (per-chunk partial sums in scratch, then
// each column adds its chunks in order).
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "gpu/ops/cuda/cublaslt_gemm.h"
#include "gpu/ops/cuda/device_math.cuh"
#include "gpu/ops/cuda/launch.h"
#include "gpu/ops/cuda/moe.h"
#include "gpu/ops/cuda/moe_common.cuh"
#include "gpu/ops/op_check.h"
#include "gpu/ops/scratch.h"

namespace tandem::gpu::ops::cuda {
namespace {

using moe_detail::chunk_slots;
using moe_detail::scratch_plan;

constexpr int row_threads = 256;
constexpr int warps_per_block = 8;
constexpr int column_threads = 128;

// ---------------------------------------------------------------------------------------------
// kernels

/// Block t: inv = (mean(x_t²) + eps)^(-1/2) (or the given one), u_t = x_t · inv · scale · H^(-1/2).
template <class S>
__global__ void router_input_kernel(const S* __restrict__ x, const S* __restrict__ scale, std::int64_t h, float eps,
                                    float root, const float* __restrict__ given_inv, float* __restrict__ inv_out,
                                    float* __restrict__ u) {
  __shared__ float shared[32];
  const std::int64_t t = blockIdx.x;
  const S* xr = x + t * h;
  float inv;
  if (given_inv) {
    inv = given_inv[t];
  } else {
    float sum = 0.f;
    for (std::int64_t i = threadIdx.x; i < h; i += blockDim.x) {
      const float v = to_float(xr[i]);
      sum += v * v;
    }
    sum = block_sum(sum, shared);
    inv = 1.f / sqrtf(sum / static_cast<float>(h) + eps);
    if (inv_out && threadIdx.x == 0) inv_out[t] = inv;
  }
  for (std::int64_t i = threadIdx.x; i < h; i += blockDim.x)
    u[t * h + i] = to_float(xr[i]) * inv * to_float(scale[i]) * root;
}

/// dst[i] = float(src[i]).
template <class S>
__global__ void widen_kernel(const S* __restrict__ src, std::int64_t n, float* __restrict__ dst) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    dst[i] = to_float(src[i]);
}

/// The order of the top-k choice: larger probability first, equal probabilities to the lower
/// expert; NaN ranks below every number. True when (v, i) comes before (w, j).
__device__ __forceinline__ bool ranks_before(float v, std::int64_t i, float w, std::int64_t j) {
  v = isnan(v) ? -INFINITY : v;
  w = isnan(w) ? -INFINITY : w;
  return v > w || (v == w && i < j);
}

/// Warp per token: probs_t = softmax(logits_t) in place, the top k of it (slot s: the best after
/// slot s-1's in ranks_before order), r = p / Σ selected p, weights = r · per_expert_scale.
template <class S>
__global__ void router_select_kernel(float* __restrict__ probs, const S* __restrict__ per_expert_scale,
                                     std::int64_t tokens, std::int64_t e, std::int64_t k, S* __restrict__ weights,
                                     std::int32_t* __restrict__ indices, S* __restrict__ renormalized) {
  const int lane = threadIdx.x & 31;
  const std::int64_t t = static_cast<std::int64_t>(blockIdx.x) * warps_per_block + (threadIdx.x >> 5);
  if (t >= tokens) return;  // a whole warp leaves together
  float* p = probs + t * e;
  float max = -INFINITY;
  for (std::int64_t j = lane; j < e; j += 32) max = fmaxf(max, p[j]);
  max = warp_max(max);
  float sum = 0.f;
  for (std::int64_t j = lane; j < e; j += 32) {
    const float v = expf(p[j] - max);
    p[j] = v;
    sum += v;
  }
  sum = warp_sum(sum);
  for (std::int64_t j = lane; j < e; j += 32) p[j] = p[j] / sum;
  __syncwarp();
  std::int32_t* idx = indices + t * k;
  float prev_v = INFINITY, selected = 0.f;
  std::int64_t prev_i = -1;
  for (std::int64_t s = 0; s < k; ++s) {
    float best_v = 0.f;
    std::int64_t best_i = -1;
    for (std::int64_t j = lane; j < e; j += 32) {
      const float v = p[j];
      if (ranks_before(prev_v, prev_i, v, j) && (best_i < 0 || ranks_before(v, j, best_v, best_i))) {
        best_v = v;
        best_i = j;
      }
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
      const float other_v = __shfl_xor_sync(0xffffffffu, best_v, offset);
      const std::int64_t other_i = __shfl_xor_sync(0xffffffffu, best_i, offset);
      if (other_i >= 0 && (best_i < 0 || ranks_before(other_v, other_i, best_v, best_i))) {
        best_v = other_v;
        best_i = other_i;
      }
    }
    // k <= e: a candidate always exists (the order is total).
    if (lane == 0) idx[s] = static_cast<std::int32_t>(best_i);
    selected += best_v;
    prev_v = best_v;
    prev_i = best_i;
  }
  __syncwarp();
  for (std::int64_t s = lane; s < k; s += 32) {
    const std::int32_t j = idx[s];
    const float r = p[j] / selected;
    if (renormalized) renormalized[t * k + s] = from_float<S>(r);
    weights[t * k + s] = from_float<S>(r * to_float(per_expert_scale[j]));
  }
}

/// Warp per token: dlogit_t = 0 but on its selected experts, dlogit[e_j] += r_j (g_j - Σ_i r_i g_i)
/// with g_j = per_expert_scale[e_j] · dweights_j, slots in order (lane 0; an index outside [0, E)
/// is skipped).
template <class S>
__global__ void router_dlogit_kernel(const std::int32_t* __restrict__ indices, const S* __restrict__ renormalized,
                                     const S* __restrict__ per_expert_scale, const S* __restrict__ dweights,
                                     std::int64_t tokens, std::int64_t e, std::int64_t k, float* __restrict__ dlogit) {
  const int lane = threadIdx.x & 31;
  const std::int64_t t = static_cast<std::int64_t>(blockIdx.x) * warps_per_block + (threadIdx.x >> 5);
  if (t >= tokens) return;
  float* d = dlogit + t * e;
  for (std::int64_t j = lane; j < e; j += 32) d[j] = 0.f;
  __syncwarp();
  if (lane != 0) return;
  const std::int32_t* idx = indices + t * k;
  float mean_g = 0.f;
  for (std::int64_t j = 0; j < k; ++j) {
    if (idx[j] < 0 || idx[j] >= e) continue;
    mean_g += to_float(renormalized[t * k + j]) * to_float(per_expert_scale[idx[j]]) * to_float(dweights[t * k + j]);
  }
  for (std::int64_t j = 0; j < k; ++j) {
    if (idx[j] < 0 || idx[j] >= e) continue;
    const float g = to_float(per_expert_scale[idx[j]]) * to_float(dweights[t * k + j]);
    d[idx[j]] += to_float(renormalized[t * k + j]) * (g - mean_g);
  }
}

/// Block c over slots [c · chunk_slots, ...): partial[c, e] = Σ r_s · dweights_s over its slots
/// routed to e, in slot order (one thread per expert, the chunk in shared memory).
template <class S>
__global__ void __launch_bounds__(chunk_slots)
    expert_scale_partial_kernel(const std::int32_t* __restrict__ indices, const S* __restrict__ renormalized,
                                const S* __restrict__ dweights, std::int64_t slots, std::int64_t e,
                                float* __restrict__ partial) {
  __shared__ std::int32_t chunk_index[chunk_slots];
  __shared__ float chunk_value[chunk_slots];
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * chunk_slots;
  const std::int64_t s = first + threadIdx.x;
  chunk_index[threadIdx.x] = s < slots ? indices[s] : -1;
  chunk_value[threadIdx.x] = s < slots ? to_float(renormalized[s]) * to_float(dweights[s]) : 0.f;
  __syncthreads();
  for (std::int64_t ex = threadIdx.x; ex < e; ex += blockDim.x) {
    float acc = 0.f;
    for (int j = 0; j < chunk_slots; ++j)
      if (chunk_index[j] == ex) acc += chunk_value[j];
    partial[static_cast<std::int64_t>(blockIdx.x) * e + ex] = acc;
  }
}

/// out[j] += scale · Σ_c partial[c, j], chunks in order (one thread per column).
template <class S>
__global__ void column_finish_kernel(const float* __restrict__ partial, std::int64_t chunks, std::int64_t columns,
                                     float scale, S* __restrict__ out) {
  const std::int64_t j = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= columns) return;
  float acc = 0.f;
  for (std::int64_t c = 0; c < chunks; ++c) acc += partial[c * columns + j];
  out[j] = from_float<S>(to_float(out[j]) + acc * scale);
}

/// partial[c, i] = Σ_{tokens of chunk c} du[t, i] · x[t, i] · inv_rms[t] (one thread per column).
template <class S>
__global__ void router_scale_partial_kernel(const float* __restrict__ du, const S* __restrict__ x,
                                            const float* __restrict__ inv_rms, std::int64_t tokens, std::int64_t h,
                                            std::int64_t tokens_per_chunk, float* __restrict__ partial) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t c = blockIdx.y;
  if (i >= h) return;
  const std::int64_t begin = c * tokens_per_chunk, end = min(tokens, begin + tokens_per_chunk);
  float acc = 0.f;
  for (std::int64_t t = begin; t < end; ++t) acc += du[t * h + i] * (to_float(x[t * h + i]) * inv_rms[t]);
  partial[c * h + i] = acc;
}

/// Block t: the scale-less RMSNorm backward, dx_t (= or +=) r (dn - n · (dn · n) / H) with
/// n = x_t · r, dn = du_t · scale · H^(-1/2).
template <class S>
__global__ void router_dx_kernel(const float* __restrict__ du, const S* __restrict__ x, const S* __restrict__ scale,
                                 const float* __restrict__ inv_rms, std::int64_t h, float root, S* __restrict__ dx,
                                 bool accumulate) {
  __shared__ float shared[32];
  const std::int64_t t = blockIdx.x;
  const float r = inv_rms[t];
  const float* g = du + t * h;
  const S* xr = x + t * h;
  float dot = 0.f;
  for (std::int64_t i = threadIdx.x; i < h; i += blockDim.x)
    dot += g[i] * to_float(scale[i]) * root * (to_float(xr[i]) * r);
  dot = block_sum(dot, shared);
  S* out = dx + t * h;
  for (std::int64_t i = threadIdx.x; i < h; i += blockDim.x) {
    const float dn = g[i] * to_float(scale[i]) * root;
    const float v = r * (dn - to_float(xr[i]) * r * dot / static_cast<float>(h));
    out[i] = from_float<S>(accumulate ? to_float(out[i]) + v : v);
  }
}

/// dst[i] = dst[i] + add[i], rounded once.
template <class S>
__global__ void add_into_kernel(const float* __restrict__ add, std::int64_t n, S* __restrict__ dst) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    dst[i] = from_float<S>(to_float(dst[i]) + add[i]);
}

unsigned warp_blocks(std::int64_t tokens) {
  return static_cast<unsigned>((tokens + warps_per_block - 1) / warps_per_block);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// launchers

status moe_router_forward(const exec_context& ctx, dtype storage, const tensor& x, const tensor& router_scale,
                          const tensor& proj, const tensor& per_expert_scale, const tensor& weights,
                          const tensor& indices, const tensor& renormalized, const tensor& inv_rms, double eps) {
  constexpr const char* op = "moe_router_forward";
  TANDEM_RETURN_IF_ERROR(use_device(ctx));
  const std::int64_t n = x.dim(0), h = x.dim(1), e = proj.dim(0), k = weights.dim(1);
  if (n == 0) return status::ok();
  const bool widen = storage == dtype::bfloat16;
  float *u = nullptr, *proj32 = nullptr, *probs = nullptr;
  std::byte* lt = nullptr;
  auto carve = [&](scratch_plan& s) {
    lt = s.take<std::byte>(gemm_workspace_bytes);
    u = s.take<float>(n * h);
    probs = s.take<float>(n * e);
    proj32 = widen ? s.take<float>(e * h) : nullptr;
  };
  scratch_plan sizing;
  carve(sizing);
  auto scratch = op_scratch::get(ctx, op, sizing.bytes());
  if (!scratch) return scratch.error();
  scratch_plan plan(scratch->data());
  carve(plan);
  const float root = static_cast<float>(1.0 / std::sqrt(static_cast<double>(h)));
  return with_storage(storage, op, [&](auto zero) -> status {
    using S = decltype(zero);
    const cudaStream_t stream = stream_of(ctx);
    router_input_kernel<S><<<static_cast<unsigned>(n), row_threads, 0, stream>>>(
        x.as<const S>(), router_scale.as<const S>(), h, static_cast<float>(eps), root, nullptr,
        inv_rms.empty() ? nullptr : inv_rms.as<float>(), u);
    TANDEM_RETURN_IF_ERROR(launch_status(op, "router_input_kernel"));
    const float* p32 = proj.as<const float>();
    if (widen) {
      widen_kernel<S><<<blocks_for(e * h, 256), 256, 0, stream>>>(proj.as<const S>(), e * h, proj32);
      TANDEM_RETURN_IF_ERROR(launch_status(op, "widen_kernel"));
      p32 = proj32;
    }
    gemm_operands g;  // logits [N, E] = u [N, H] · projᵀ
    g.transpose_b = true;
    g.m = n, g.n = e, g.k = h;
    g.row_invariant = true;
    g.a = u, g.lda = h;
    g.b = p32, g.ldb = h;
    g.c = probs, g.ldc = e;
    TANDEM_RETURN_IF_ERROR(gemm(ctx, op, dtype::float32, dtype::float32, g, lt));
    router_select_kernel<S><<<warp_blocks(n), warps_per_block * 32, 0, stream>>>(
        probs, per_expert_scale.as<const S>(), n, e, k, weights.as<S>(), indices.as<std::int32_t>(),
        renormalized.empty() ? nullptr : renormalized.as<S>());
    return launch_status(op, "router_select_kernel");
  });
}

status moe_router_backward(const exec_context& ctx, dtype storage, const tensor& x, const tensor& router_scale,
                           const tensor& proj, const tensor& per_expert_scale, const tensor& indices,
                           const tensor& renormalized, const tensor& inv_rms, const tensor& dweights, const tensor& dx,
                           const tensor& dproj, const tensor& drouter_scale, const tensor& dper_expert_scale,
                           bool accumulate_dx) {
  constexpr const char* op = "moe_router_backward";
  TANDEM_RETURN_IF_ERROR(use_device(ctx));
  const std::int64_t n = x.dim(0), h = x.dim(1), e = proj.dim(0), k = indices.dim(1);
  const bool bf16 = storage == dtype::bfloat16;
  const bool need_du = !dx.empty() || !drouter_scale.empty();
  if (n == 0) return status::ok();  // every gradient is an empty sum (+= 0), dx has no rows
  const std::int64_t slots = n * k, slot_chunks = (slots + chunk_slots - 1) / chunk_slots;
  // Token chunks of the router_scale column sums: enough blocks to fill the GPU.
  const std::int64_t column_blocks = (h + column_threads - 1) / column_threads;
  const std::int64_t token_chunks =
      std::clamp<std::int64_t>((132 * 8) / std::max<std::int64_t>(column_blocks, 1), 1, std::min<std::int64_t>(n, 1024));
  const std::int64_t tokens_per_chunk = (n + token_chunks - 1) / token_chunks;
  std::byte* lt = nullptr;
  float *dlogit = nullptr, *u = nullptr, *proj32 = nullptr, *du = nullptr, *dproj32 = nullptr, *pe_partial = nullptr,
        *scale_partial = nullptr;
  auto carve = [&](scratch_plan& s) {
    lt = s.take<std::byte>(gemm_workspace_bytes);
    dlogit = s.take<float>(n * e);
    if (!dproj.empty()) u = s.take<float>(n * h);
    if (!dproj.empty() && bf16) dproj32 = s.take<float>(e * h);
    if (need_du && bf16) proj32 = s.take<float>(e * h);
    if (need_du) du = s.take<float>(n * h);
    if (!dper_expert_scale.empty()) pe_partial = s.take<float>(slot_chunks * e);
    if (!drouter_scale.empty()) scale_partial = s.take<float>(token_chunks * h);
  };
  scratch_plan sizing;
  carve(sizing);
  auto scratch = op_scratch::get(ctx, op, sizing.bytes());
  if (!scratch) return scratch.error();
  scratch_plan plan(scratch->data());
  carve(plan);
  const float root = static_cast<float>(1.0 / std::sqrt(static_cast<double>(h)));
  return with_storage(storage, op, [&](auto zero) -> status {
    using S = decltype(zero);
    const cudaStream_t stream = stream_of(ctx);
    router_dlogit_kernel<S><<<warp_blocks(n), warps_per_block * 32, 0, stream>>>(
        indices.as<const std::int32_t>(), renormalized.as<const S>(), per_expert_scale.as<const S>(),
        dweights.as<const S>(), n, e, k, dlogit);
    TANDEM_RETURN_IF_ERROR(launch_status(op, "router_dlogit_kernel"));
    if (!dper_expert_scale.empty()) {
      expert_scale_partial_kernel<S><<<static_cast<unsigned>(slot_chunks), chunk_slots, 0, stream>>>(
          indices.as<const std::int32_t>(), renormalized.as<const S>(), dweights.as<const S>(), slots, e, pe_partial);
      TANDEM_RETURN_IF_ERROR(launch_status(op, "expert_scale_partial_kernel"));
      column_finish_kernel<S><<<static_cast<unsigned>((e + column_threads - 1) / column_threads), column_threads, 0,
                                stream>>>(pe_partial, slot_chunks, e, 1.f, dper_expert_scale.as<S>());
      TANDEM_RETURN_IF_ERROR(launch_status(op, "column_finish_kernel"));
    }
    if (!dproj.empty()) {  // dproj += dlogitᵀ [E, N] · u [N, H]
      router_input_kernel<S><<<static_cast<unsigned>(n), row_threads, 0, stream>>>(
          x.as<const S>(), router_scale.as<const S>(), h, 0.f, root, inv_rms.as<const float>(), nullptr, u);
      TANDEM_RETURN_IF_ERROR(launch_status(op, "router_input_kernel"));
      gemm_operands g;
      g.transpose_a = true;
      g.m = e, g.n = h, g.k = n;
      g.a = dlogit, g.lda = e;
      g.b = u, g.ldb = h;
      g.c = bf16 ? static_cast<void*>(dproj32) : dproj.data(), g.ldc = h;
      g.accumulate = !bf16;
      TANDEM_RETURN_IF_ERROR(gemm(ctx, op, dtype::float32, dtype::float32, g, lt));
      if (bf16) {
        add_into_kernel<S><<<blocks_for(e * h, 256), 256, 0, stream>>>(dproj32, e * h, dproj.as<S>());
        TANDEM_RETURN_IF_ERROR(launch_status(op, "add_into_kernel"));
      }
    }
    if (!need_du) return status::ok();
    const float* p32 = proj.as<const float>();
    if (bf16) {
      widen_kernel<S><<<blocks_for(e * h, 256), 256, 0, stream>>>(proj.as<const S>(), e * h, proj32);
      TANDEM_RETURN_IF_ERROR(launch_status(op, "widen_kernel"));
      p32 = proj32;
    }
    gemm_operands g;  // du [N, H] = dlogit [N, E] · proj [E, H]
    g.m = n, g.n = h, g.k = e;
    g.a = dlogit, g.lda = e;
    g.b = p32, g.ldb = h;
    g.c = du, g.ldc = h;
    TANDEM_RETURN_IF_ERROR(gemm(ctx, op, dtype::float32, dtype::float32, g, lt));
    if (!drouter_scale.empty()) {
      router_scale_partial_kernel<S><<<dim3(static_cast<unsigned>(column_blocks), static_cast<unsigned>(token_chunks)),
                                       column_threads, 0, stream>>>(du, x.as<const S>(), inv_rms.as<const float>(), n,
                                                                    h, tokens_per_chunk, scale_partial);
      TANDEM_RETURN_IF_ERROR(launch_status(op, "router_scale_partial_kernel"));
      column_finish_kernel<S><<<static_cast<unsigned>(column_blocks), column_threads, 0, stream>>>(
          scale_partial, token_chunks, h, root, drouter_scale.as<S>());
      TANDEM_RETURN_IF_ERROR(launch_status(op, "column_finish_kernel"));
    }
    if (!dx.empty()) {
      router_dx_kernel<S><<<static_cast<unsigned>(n), row_threads, 0, stream>>>(
          du, x.as<const S>(), router_scale.as<const S>(), inv_rms.as<const float>(), h, root, dx.as<S>(),
          accumulate_dx);
      TANDEM_RETURN_IF_ERROR(launch_status(op, "router_dx_kernel"));
    }
    return status::ok();
  });
}

}  // namespace tandem::gpu::ops::cuda
