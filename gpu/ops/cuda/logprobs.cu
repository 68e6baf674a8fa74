// Scoring on CUDA: one block per row runs filter_row (token_filter.cuh: maximum, top-k and top-p
// cuts by histogram selection, S over the kept set), then thread 0 reads the target's logprob and
// the entropy, or the block writes the row's softmax gradient with 16-byte vector loads and stores
// where the rows allow them.
#include "gpu/ops/cuda/logprobs.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "gpu/ops/cuda/device_math.cuh"
#include "gpu/ops/cuda/launch.h"
#include "gpu/ops/cuda/token_filter.cuh"
#include "gpu/ops/op_check.h"

namespace tandem::gpu::ops::cuda {
namespace {

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
/// storage: in float32 (one rounding to bfloat16 follows, far coarser than float32's).
template <class S>
struct gradient {
  using real = std::conditional_t<std::is_same_v<S, float>, double, float>;
  const filter::row_state& row;
  std::int64_t t;
  bool bad, scored;
  real inv_sum, scale;
  __device__ __forceinline__ S operator()(float x, std::int64_t j, float old, bool accumulate) const {
    real g = 0;
    if (bad) {
      g = static_cast<real>(NAN);
    } else if (scored && (row.all_kept || filter::is_kept(row, filter::rank_key(x), j))) {
      const real prob = static_cast<real>(filter::token_weight(row, x)) * inv_sum;
      g = ((j == t ? real(1) : real(0)) - prob) * scale;
    }
    if constexpr (std::is_same_v<real, double>)
      return filter::from_double<S>(accumulate ? static_cast<double>(old) + g : g);
    else
      return from_float<S>(accumulate ? old + g : g);
  }
};

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
  using real = typename gradient<S>::real;
  const double scale = static_cast<double>(to_float(dlogprobs[r])) / p.temperature_d;
  const double inv_sum = bad ? 0.0 : 1.0 / row.sum;
  const gradient<S> grad{row, t, bad, scored, static_cast<real>(inv_sum), static_cast<real>(scale)};

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
