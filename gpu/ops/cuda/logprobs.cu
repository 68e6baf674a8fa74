// Scoring on CUDA: one block per row runs filter_row (token_filter.cuh: maximum, top-k and top-p
// cuts by histogram selection, S over the kept set), then thread 0 reads the target's logprob and
// the entropy, or the block writes the row's softmax gradient with 16-byte vector loads and stores
// where the rows allow them (3 passes over the row: the filter's read, then read and write).
// Without top-k / top-p, rows of more than half and at most 32768 16-byte chunks (bfloat16
// V <= 262144) take a cluster of 8 blocks instead: the row is read once into registers, the
// maximum and S combined over the cluster's shared memory in rank order, and the gradient
// written from the registers (2 passes).
#include "gpu/ops/cuda/logprobs.h"

#include <cooperative_groups.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "gpu/ops/cuda/device_math.cuh"
#include "gpu/ops/cuda/launch.h"
#include "gpu/ops/cuda/token_filter_row.cuh"
#include "gpu/ops/op_check.h"

namespace tandem::gpu::ops::cuda {
namespace {

namespace cg = cooperative_groups;

using filter::row_threads;

// ---------------------------------------------------------------------------------------------
// kernels

/// Block r: logprobs[r] = logprob of targets[r] in row r's filtered distribution; entropy[r] =
/// log S - sum_P e_j d_j / S.
template <class S, class O>
__global__ void __launch_bounds__(row_threads, 2) logprobs_forward_kernel(const S* __restrict__ logits,
                                                                       const std::int32_t* __restrict__ targets,
                                                                       std::int64_t v, filter::params p,
                                                                       O* __restrict__ logprobs, O* __restrict__ entropy) {
  __shared__ filter::scratch sh;
  extern __shared__ __align__(16) unsigned char dyn[];
  const std::int64_t r = blockIdx.x;
  const S* x = logits + r * v;
  filter::filter_row(x, v, p, filter::carve(dyn, p.use_p), sh, entropy != nullptr, false);
  if (threadIdx.x != 0) return;
  const filter::row_state& row = sh.row;
  if (!row.finite) {
    logprobs[r] = filter::from_double<O>(NAN);
    if (entropy) entropy[r] = filter::from_double<O>(NAN);
    return;
  }
  const std::int64_t t = targets[r];
  const double lp = t >= 0 && t < v ? filter::token_logprob(row, to_float(x[t]), t) : NAN;
  logprobs[r] = filter::from_double<O>(lp);
  if (entropy) entropy[r] = filter::from_double<O>(row.log_sum - row.weighted / row.sum);
}

/// The gradient of one token: (onehot(t)_j - e_j / S) * dlogprobs / T for j in P when the target
/// is kept, else 0; NaN for a bad row. Float32 storage: in double, as the CPU reference; bfloat16
/// storage: in float32 (one rounding to bfloat16 follows, far coarser than float32's). The row's
/// fields are copied into registers (no shared-memory reads per element).
template <class S>
struct gradient {
  using real = std::conditional_t<std::is_same_v<S, float>, double, float>;
  float x_max, exp2_scale;
  bool all_kept;
  std::uint32_t cut_key;
  std::int32_t cut_id;
  std::int64_t t;
  bool bad, scored;
  real inv_sum, scale;
  __device__ __forceinline__ S operator()(float x, std::int64_t j, float old, bool accumulate) const {
    real g = 0;
    if (bad) {
      g = static_cast<real>(NAN);
    } else if (scored) {
      bool kept = all_kept;
      if (!kept) {
        const std::uint32_t key = filter::rank_key(x);
        kept = key > cut_key || (key == cut_key && j <= cut_id);
      }
      if (kept) {
        const real prob = static_cast<real>(filter::weight_of(x, x_max, exp2_scale)) * inv_sum;
        g = ((j == t ? real(1) : real(0)) - prob) * scale;
      }
    }
    if constexpr (std::is_same_v<real, double>)
      return filter::from_double<S>(accumulate ? static_cast<double>(old) + g : g);
    else
      return from_float<S>(accumulate ? old + g : g);
  }
};

/// The gradient of row `row` (its x_max, e_j and kept set P).
template <class S>
__device__ __forceinline__ gradient<S> gradient_of(const filter::row_state& row, std::int64_t t, bool bad, bool scored,
                                                   double inv_sum, double scale) {
  using real = typename gradient<S>::real;
  return gradient<S>{row.x_max,   row.exp2_scale, row.all_kept, row.cut_key, row.cut_id, t, bad, scored,
                     static_cast<real>(inv_sum), static_cast<real>(scale)};
}

/// Block r: dlogits[r, j] (= or +=) gradient<S> of each token. The row is walked from its end
/// back (two 16-byte chunks per thread at a time): the filter's last pass read the end
/// last, so that part is still in L2; dlogits are streaming stores.
template <class S, class G>
__global__ void __launch_bounds__(row_threads, 2) logprobs_backward_kernel(const S* __restrict__ logits,
                                                                        const std::int32_t* __restrict__ targets,
                                                                        const G* __restrict__ dlogprobs, std::int64_t v,
                                                                        filter::params p, S* __restrict__ dlogits,
                                                                        bool accumulate) {
  __shared__ filter::scratch sh;
  extern __shared__ __align__(16) unsigned char dyn[];
  const std::int64_t r = blockIdx.x;
  const S* x = logits + r * v;
  S* dx = dlogits + r * v;
  filter::filter_row(x, v, p, filter::carve(dyn, p.use_p), sh, false, false);
  const filter::row_state& row = sh.row;
  const std::int64_t t = targets[r];
  const bool bad = !row.finite || t < 0 || t >= v;
  const bool scored = !bad && filter::is_kept(row, filter::rank_key(to_float(x[t])), t);
  const double scale = static_cast<double>(to_float(dlogprobs[r])) / p.temperature_d;
  const double inv_sum = bad ? 0.0 : 1.0 / row.sum;
  const gradient<S> grad = gradient_of<S>(row, t, bad, scored, inv_sum, scale);

  constexpr int n = 16 / sizeof(S), U = 2;
  const std::int64_t chunks = (v + n - 1) / n;
  const std::int64_t step = blockDim.x;
  const bool vec = reinterpret_cast<std::uintptr_t>(x) % 16 == 0 && reinterpret_cast<std::uintptr_t>(dx) % 16 == 0 &&
                   v % n == 0;
  if (vec) {
    const uint4* xv = reinterpret_cast<const uint4*>(x);
    uint4* dv = reinterpret_cast<uint4*>(dx);
    // Chunk c = chunks - 1 - i for i = tid, tid + blockDim, ...
    for (std::int64_t i0 = threadIdx.x; i0 < chunks; i0 += U * step) {
      uint4 raw_x[U], raw_old[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const std::int64_t c = chunks - 1 - (i0 + u * step);
        raw_x[u] = make_uint4(0, 0, 0, 0);
        raw_old[u] = make_uint4(0, 0, 0, 0);
        if (c >= 0) {
          raw_x[u] = __ldcs(xv + c);  // the last use of the logits
          if (accumulate) raw_old[u] = __ldcs(dv + c);
        }
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const std::int64_t c = chunks - 1 - (i0 + u * step);
        if (c < 0) continue;
        S ex[n], eo[n], out[n];
        memcpy(ex, &raw_x[u], sizeof ex);
        memcpy(eo, &raw_old[u], sizeof eo);
#pragma unroll
        for (int k = 0; k < n; ++k) out[k] = grad(to_float(ex[k]), c * n + k, to_float(eo[k]), accumulate);
        uint4 raw_out;
        memcpy(&raw_out, out, sizeof raw_out);
        __stcs(dv + c, raw_out);
      }
    }
  } else {
    for (std::int64_t j = threadIdx.x; j < v; j += step)
      dx[j] = grad(to_float(x[j]), j, accumulate ? to_float(dx[j]) : 0.f, accumulate);
  }
}

// ---------------------------------------------------------------------------------------------
// the backward of a whole row on chip (no top-k / top-p)

/// A thread-block cluster of cluster_ctas blocks of cluster_threads takes one row of at most
/// cluster_chunks 16-byte chunks: each thread holds cluster_k chunks in registers, so the row is
/// read once and its gradient written once.
constexpr int cluster_ctas = 8;
constexpr int cluster_threads = 512;
constexpr int cluster_k = 8;
constexpr std::int64_t cluster_chunks = std::int64_t{cluster_ctas} * cluster_threads * cluster_k;

__device__ __forceinline__ void cluster_arrive() { asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory"); }
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory"); }

/// Cluster r (blocks r · cluster_ctas ...): dlogits[r, j] (= or +=) gradient<S> of each token of
/// a row of v = a whole number of chunks, P = every token. Block q holds chunks
/// q · cluster_threads · cluster_k + t + i · cluster_threads (i < cluster_k) of the row (16-byte
/// loads when the row is aligned, element loads when not: the same sums either way). The
/// maximum: each block's (exact), combined over the cluster's shared memory; S = sum_j e_j with
/// e_j = token_weight (the gradient's own formula): per thread in float32 in chunk order, per
/// block in double by the fixed tree, then the blocks' sums in rank order, which every block
/// reads alike. A NaN logit makes S NaN, +-infinity fail the range test: the row is bad.
template <class S, class G, bool Accumulate>
__global__ void __cluster_dims__(cluster_ctas, 1, 1) __launch_bounds__(cluster_threads, 2)
    logprobs_backward_cluster_kernel(const S* __restrict__ logits, const std::int32_t* __restrict__ targets,
                                     const G* __restrict__ dlogprobs, std::int64_t v, filter::params p,
                                     S* __restrict__ dlogits) {
  constexpr int n = 16 / sizeof(S), K = cluster_k;
  __shared__ double red_d[32];
  __shared__ float block_max_value;
  __shared__ int block_finite;
  __shared__ double block_sum_value;
  cg::cluster_group cluster = cg::this_cluster();
  const std::int64_t r = blockIdx.x / cluster_ctas;
  const std::int64_t first = static_cast<std::int64_t>(cluster.block_rank()) * (cluster_threads * K) + threadIdx.x;
  const S* x = logits + r * v;
  S* dx = dlogits + r * v;
  const std::int64_t chunks = v / n;
  const bool vec = reinterpret_cast<std::uintptr_t>(x) % 16 == 0 && reinterpret_cast<std::uintptr_t>(dx) % 16 == 0;
  auto load = [&](const S* row, std::int64_t c, bool streaming) {
    uint4 raw = make_uint4(0, 0, 0, 0);
    if (vec) {
      raw = streaming ? __ldcs(reinterpret_cast<const uint4*>(row) + c) : __ldg(reinterpret_cast<const uint4*>(row) + c);
    } else {
      S e[n];
#pragma unroll
      for (int k = 0; k < n; ++k) e[k] = row[c * n + k];
      memcpy(&raw, e, sizeof raw);
    }
    return raw;
  };

  // 1. The row's chunks, their range.
  uint4 raw[K];
  float hi = -INFINITY, lo = INFINITY;
#pragma unroll
  for (int i = 0; i < K; ++i) {
    const std::int64_t c = first + i * cluster_threads;
    raw[i] = c < chunks ? load(x, c, true) : make_uint4(0, 0, 0, 0);  // the only read of the logits
  }
#pragma unroll
  for (int i = 0; i < K; ++i) {
    if (first + i * cluster_threads >= chunks) continue;
    S e[n];
    memcpy(e, &raw[i], sizeof e);
#pragma unroll
    for (int k = 0; k < n; ++k) {
      hi = fmaxf(hi, to_float(e[k]));
      lo = fminf(lo, to_float(e[k]));
    }
  }
  const bool finite = __syncthreads_and(lo > -INFINITY && hi < INFINITY) != 0;
  hi = filter::block_max_f(hi, red_d);
  if (threadIdx.x == 0) {
    block_max_value = hi;
    block_finite = finite ? 1 : 0;
  }
  cluster.sync();
  // 2. The row's maximum (exact in any order) and S, the blocks' sums in rank order.
  float x_max = -INFINITY;
  bool row_finite = true;
  for (unsigned q = 0; q < cluster_ctas; ++q) {
    x_max = fmaxf(x_max, *cluster.map_shared_rank(&block_max_value, q));
    row_finite = row_finite && *cluster.map_shared_rank(&block_finite, q) != 0;
  }
  if (x_max == 0.f) x_max = 0.f;  // +0
  float te = 0.f;
#pragma unroll
  for (int i = 0; i < K; ++i) {
    if (first + i * cluster_threads >= chunks) continue;
    S e[n];
    memcpy(e, &raw[i], sizeof e);
    float pe = 0.f;
#pragma unroll
    for (int k = 0; k < n; ++k) pe += filter::weight_of(to_float(e[k]), x_max, p.exp2_scale);
    te += pe;
  }
  const double block_s = filter::block_sum_d(static_cast<double>(te), red_d);
  if (threadIdx.x == 0) block_sum_value = block_s;
  cluster.sync();
  double sum = 0.0;
  for (unsigned q = 0; q < cluster_ctas; ++q) sum += *cluster.map_shared_rank(&block_sum_value, q);
  cluster_arrive();  // done with the other blocks' shared memory; they may leave once all arrive

  // 3. The gradient from the registers. Every chunk but the target's, in a row that is not bad,
  // takes the general formula with its constant parts hoisted: g = (0 - e_j · (1/S)) · scale, the
  // same operations in the same order (the same bits), without the per-token tests of the
  // target, the kept set and the bad row.
  const std::int64_t t = targets[r];
  const bool bad = !row_finite || isnan(sum) || t < 0 || t >= v;
  const double scale = static_cast<double>(to_float(dlogprobs[r])) / p.temperature_d;
  const double inv_sum = bad ? 0.0 : 1.0 / sum;
  using real = typename gradient<S>::real;
  const gradient<S> grad{x_max, p.exp2_scale, true, 0u, 0, t, bad, !bad, static_cast<real>(inv_sum),
                         static_cast<real>(scale)};
  const std::int64_t general_chunk = bad ? -2 : t / n;  // -2: every chunk (c >= 0 > -2 is never equal)
  const real r_inv_sum = static_cast<real>(inv_sum), r_scale = static_cast<real>(scale);
  const float exp2_scale = p.exp2_scale;
#pragma unroll
  for (int i = 0; i < K; ++i) {
    const std::int64_t c = first + i * cluster_threads;
    if (c >= chunks) continue;
    S ex[n], eo[n], out[n];
    memcpy(ex, &raw[i], sizeof ex);
    if constexpr (Accumulate) {
      const uint4 old = load(dx, c, true);
      memcpy(eo, &old, sizeof eo);
    }
    if (bad || c == general_chunk) {
#pragma unroll
      for (int k = 0; k < n; ++k) out[k] = grad(to_float(ex[k]), c * n + k, Accumulate ? to_float(eo[k]) : 0.f, Accumulate);
    } else {
#pragma unroll
      for (int k = 0; k < n; ++k) {
        const real prob = static_cast<real>(filter::weight_of(to_float(ex[k]), x_max, exp2_scale)) * r_inv_sum;
        const real g = (real(0) - prob) * r_scale;
        if constexpr (std::is_same_v<real, double>)
          out[k] = filter::from_double<S>(Accumulate ? static_cast<double>(to_float(eo[k])) + g : g);
        else
          out[k] = from_float<S>(Accumulate ? to_float(eo[k]) + g : g);
      }
    }
    if (vec) {
      uint4 raw_out;
      memcpy(&raw_out, out, sizeof raw_out);
      __stcs(reinterpret_cast<uint4*>(dx) + c, raw_out);
    } else {
#pragma unroll
      for (int k = 0; k < n; ++k) dx[c * n + k] = out[k];
    }
  }
  cluster_wait();
}

/// Whether logprobs_backward_cluster_kernel takes rows of v tokens under p: no top-k / top-p, a
/// whole number of chunks, more than half a cluster's capacity (shorter rows: the block per row,
/// whose second read of the row hits L2), at most all of it, and the grid within 2^31 blocks.
template <class S>
bool cluster_backward_fits(std::int64_t rows, std::int64_t v, const filter::params& p) {
  constexpr int n = 16 / sizeof(S);
  return !p.use_k && !p.use_p && v % n == 0 && v / n * 2 > cluster_chunks && v / n <= cluster_chunks &&
         rows <= (std::int64_t{1} << 31) / cluster_ctas - 1;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// launchers

status logprobs_forward(const exec_context& ctx, dtype storage, const tensor& logits, const tensor& targets,
                        const sampling_params& params, const tensor& logprobs, const tensor& entropy) {
  constexpr const char* op = "logprobs_forward";
  TANDEM_RETURN_IF_ERROR(use_device(ctx));
  const std::int64_t rows = logits.dim(0), v = logits.dim(1);
  if (rows == 0) return status::ok();
  const filter::params p = filter::make_params(params, v);
  const std::size_t bytes = filter::dynamic_bytes(p.use_k, p.use_p);
  return with_storage(storage, op, [&](auto zero) -> status {
    using S = decltype(zero);
    auto launch = [&](auto out_zero) -> status {
      using O = decltype(out_zero);
      auto* kernel = &logprobs_forward_kernel<S, O>;
      TANDEM_RETURN_IF_ERROR(filter::allow_dynamic_shared(kernel, bytes));
      kernel<<<static_cast<unsigned>(rows), row_threads, bytes, stream_of(ctx)>>>(
          logits.as<const S>(), targets.as<const std::int32_t>(), v, p, logprobs.as<O>(),
          entropy.empty() ? nullptr : entropy.as<O>());
      return launch_status(op, "logprobs_forward_kernel");
    };
    if (logprobs.type() == dtype::float32) return launch(float{});
    return launch(S{});
  });
}

status logprobs_backward(const exec_context& ctx, dtype storage, const tensor& logits, const tensor& targets,
                         const sampling_params& params, const tensor& dlogprobs, const tensor& dlogits,
                         bool accumulate) {
  constexpr const char* op = "logprobs_backward";
  TANDEM_RETURN_IF_ERROR(use_device(ctx));
  const std::int64_t rows = logits.dim(0), v = logits.dim(1);
  if (rows == 0) return status::ok();
  const filter::params p = filter::make_params(params, v);
  const std::size_t bytes = filter::dynamic_bytes(p.use_k, p.use_p);
  return with_storage(storage, op, [&](auto zero) -> status {
    using S = decltype(zero);
    auto launch = [&](auto grad_zero) -> status {
      using G = decltype(grad_zero);
      if (cluster_backward_fits<S>(rows, v, p)) {
        auto* kernel = accumulate ? &logprobs_backward_cluster_kernel<S, G, true> : &logprobs_backward_cluster_kernel<S, G, false>;
        kernel<<<static_cast<unsigned>(rows * cluster_ctas), cluster_threads, 0, stream_of(ctx)>>>(
            logits.as<const S>(), targets.as<const std::int32_t>(), dlogprobs.as<const G>(), v, p, dlogits.as<S>());
        return launch_status(op, "logprobs_backward_cluster_kernel");
      }
      auto* kernel = &logprobs_backward_kernel<S, G>;
      TANDEM_RETURN_IF_ERROR(filter::allow_dynamic_shared(kernel, bytes));
      kernel<<<static_cast<unsigned>(rows), row_threads, bytes, stream_of(ctx)>>>(
          logits.as<const S>(), targets.as<const std::int32_t>(), dlogprobs.as<const G>(), v, p, dlogits.as<S>(),
          accumulate);
      return launch_status(op, "logprobs_backward_kernel");
    };
    if (dlogprobs.type() == dtype::float32) return launch(float{});
    return launch(S{});
  });
}

}  // namespace tandem::gpu::ops::cuda
