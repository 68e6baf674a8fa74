// Softcapping on CUDA: one element-wise map each way (elementwise_map.cuh: 16-byte vectors when
// aligned), t = tanhf(x / cap) in float32, the CPU reference's order of operations (the quotient
// by a corrected reciprocal product, see quotient).
#include "gpu/ops/cuda/softcap.h"

#include "gpu/ops/cuda/device_math.cuh"
#include "gpu/ops/cuda/elementwise_map.cuh"
#include "gpu/ops/cuda/launch.h"
#include "gpu/ops/op_check.h"

namespace tandem::gpu::ops::cuda {
namespace {

// ---------------------------------------------------------------------------------------------
// kernels (the functors of the map)

/// x / cap without the division's instruction sequence: q = x · (1/cap) corrected once by the
/// exact residual x - q · cap (one fma): the correctly rounded quotient (Markstein's theorem, rcp
/// being 1/cap rounded to float) for normal results, within an ulp where x / cap is subnormal;
/// infinite and NaN quotients pass through.
/// The map is compute-bound with the full division beside the accurate tanhf.
struct quotient {
  float cap, rcp;
  __device__ __forceinline__ float operator()(float x) const {
    const float q = x * rcp;
    const float r = fmaf(-q, cap, x);
    return isfinite(q) ? fmaf(r, rcp, q) : q;  // ±inf (x infinite or the quotient overflows), NaN
  }
};

quotient quotient_by(double cap) {
  return {static_cast<float>(cap), static_cast<float>(1.0 / static_cast<double>(static_cast<float>(cap)))};
}

/// y = tanh(x / cap) · cap.
struct softcap_forward_op {
  quotient div;
  __device__ void operator()(const float (&x)[1], float (&y)[1]) const { y[0] = tanhf(div(x[0])) * div.cap; }
};

/// dx = dy · (1 − t²), t = tanh(x / cap); inputs (x, dy).
struct softcap_backward_op {
  quotient div;
  __device__ void operator()(const float (&x)[2], float (&y)[1]) const {
    const float t = tanhf(div(x[0]));
    y[0] = x[1] * (1.f - t * t);
  }
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// launchers

status softcap_forward(const exec_context& ctx, dtype storage, const tensor& x, double cap, const tensor& y) {
  constexpr const char* op = "softcap_forward";
  TANDEM_RETURN_IF_ERROR(use_device(ctx));
  return with_storage(storage, op, [&](auto zero) {
    using S = decltype(zero);
    const S* in[1] = {x.as<const S>()};
    S* out[1] = {y.as<S>()};
    return launch_map(ctx, op, "map_kernel<softcap_forward_op>", in, out, x.numel(),
                      softcap_forward_op{quotient_by(cap)});
  });
}

status softcap_backward(const exec_context& ctx, dtype storage, const tensor& x, double cap, const tensor& dy,
                        const tensor& dx) {
  constexpr const char* op = "softcap_backward";
  TANDEM_RETURN_IF_ERROR(use_device(ctx));
  return with_storage(storage, op, [&](auto zero) {
    using S = decltype(zero);
    const S* in[2] = {x.as<const S>(), dy.as<const S>()};
    S* out[1] = {dx.as<S>()};
    return launch_map(ctx, op, "map_kernel<softcap_backward_op>", in, out, x.numel(),
                      softcap_backward_op{quotient_by(cap)});
  });
}

}  // namespace tandem::gpu::ops::cuda
