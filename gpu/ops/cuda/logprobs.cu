// Scoring on CUDA: one block per row runs filter_row (token_filter.cuh: maximum, top-k and top-p
// cuts by histogram selection, S over the kept set), then thread 0 reads the target's logprob and
// the entropy, or the block writes the row's softmax gradient with 16-byte vector loads and stores
// where the rows allow them.
#include "gpu/ops/cuda/logprobs.h"

#include <cmath>
#include <cstdint>

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
  filter::filter_row(x, v, p, filter::carve(dyn, p.use_p), sh, entropy != nullptr);
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

/// Block r: dlogits[r, j] (= or +=) (onehot(t)_j - e_j / S) * dlogprobs[r] / T for j in P when the
/// target is kept, else 0; NaN for a row with a non-finite logit or a target outside [0, V).
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
  filter::filter_row(x, v, p, filter::carve(dyn, p.use_p), sh, false);
  const filter::row_state& row = sh.row;
  const std::int64_t t = targets[r];
  const bool bad = !row.finite || t < 0 || t >= v;
  const bool scored = !bad && filter::is_kept(row, filter::rank_key(to_float(x[t])), t);
  const double scale = static_cast<double>(to_float(dlogprobs[r])) / p.temperature_d;
  const double inv_sum = bad ? 0.0 : 1.0 / row.sum;

  constexpr int n = 16 / sizeof(S);
  const std::int64_t chunks = (v + n - 1) / n;
  const bool vec = reinterpret_cast<std::uintptr_t>(x) % 16 == 0 && reinterpret_cast<std::uintptr_t>(dx) % 16 == 0 &&
                   v % n == 0;
  for (std::int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
    float xs[n], old[n];
    uint4 raw_x = make_uint4(0, 0, 0, 0), raw_old = make_uint4(0, 0, 0, 0);
    if (vec) {
      raw_x = __ldg(reinterpret_cast<const uint4*>(x) + c);
      if (accumulate) raw_old = reinterpret_cast<const uint4*>(dx)[c];
      const S* ex = reinterpret_cast<const S*>(&raw_x);
      const S* eo = reinterpret_cast<const S*>(&raw_old);
#pragma unroll
      for (int k = 0; k < n; ++k) {
        xs[k] = to_float(ex[k]);
        old[k] = to_float(eo[k]);
      }
    } else {
#pragma unroll
      for (int k = 0; k < n; ++k) {
        const std::int64_t j = c * n + k;
        xs[k] = j < v ? to_float(x[j]) : 0.f;
        old[k] = j < v && accumulate ? to_float(dx[j]) : 0.f;
      }
    }
    S out[n];
#pragma unroll
    for (int k = 0; k < n; ++k) {
      const std::int64_t j = c * n + k;
      double g = 0.0;
      if (bad) {
        g = NAN;
      } else if (scored && filter::is_kept(row, filter::rank_key(xs[k]), j)) {
        const double prob = static_cast<double>(filter::token_weight(row, xs[k])) * inv_sum;
        g = ((j == t ? 1.0 : 0.0) - prob) * scale;
      }
      out[k] = filter::from_double<S>(accumulate ? static_cast<double>(old[k]) + g : g);
    }
    if (vec) {
      reinterpret_cast<uint4*>(dx)[c] = *reinterpret_cast<const uint4*>(out);
    } else {
#pragma unroll
      for (int k = 0; k < n; ++k)
        if (c * n + k < v) dx[c * n + k] = out[k];
    }
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
