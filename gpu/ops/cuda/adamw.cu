// AdamW on CUDA: one fused kernel per call, templated on the storage of param, exp_avg, exp_avg_sq
// and model_copy. A 64-bit grid-stride loop over groups of 8 elements (two 16-byte loads and
// stores for float32, one for bfloat16: the step moves 14 to 28 bytes an element and is bound by
// memory bandwidth) when every operand is aligned for it, the remaining 0-7 elements (or every
// element, when some operand is not aligned) one at a time. Every operation is
// an explicitly rounded intrinsic (__fmul_rn, __fadd_rn, __fdiv_rn, __fsqrt_rn): nvcc would
// otherwise fuse a*b+c, which the CPU float32 path does not.
#include "gpu/ops/cuda/adamw.h"

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "gpu/ops/cuda/device_math.cuh"
#include "gpu/ops/cuda/launch.h"
#include "gpu/ops/op_check.h"

namespace tandem::gpu::ops::cuda {
namespace {

constexpr int threads = 256;
constexpr int vector = 8;  ///< elements per group

/// The step's scalars, rounded to float32 from double as the CPU path rounds them.
struct adamw_scalars {
  float beta1, beta2, one_minus_beta1, one_minus_beta2, correction1, correction2, decay, lr, eps, grad_scale;
};

/// Storage of model_copy when there is none.
struct no_copy {};

// ---------------------------------------------------------------------------------------------
// kernels

/// One element: m, v and p updated in the header's order, each operation rounded.
__device__ __forceinline__ void adamw_element(const adamw_scalars& h, float grad, float& p, float& m, float& v) {
  const float g = __fmul_rn(h.grad_scale, grad);
  m = __fadd_rn(__fmul_rn(h.beta1, m), __fmul_rn(h.one_minus_beta1, g));
  v = __fadd_rn(__fmul_rn(h.beta2, v), __fmul_rn(h.one_minus_beta2, __fmul_rn(g, g)));
  const float m_hat = __fdiv_rn(m, h.correction1);
  const float v_hat = __fdiv_rn(v, h.correction2);
  p = __fmul_rn(p, h.decay);
  p = __fsub_rn(p, __fmul_rn(h.lr, __fdiv_rn(m_hat, __fadd_rn(__fsqrt_rn(v_hat), h.eps))));
}

/// Eight consecutive elements as floats; 32-byte (float) or 16-byte (bfloat16) aligned.
struct float8 {
  float v[8];
};
__device__ __forceinline__ float8 load8(const float* p) {
  const float4 a = *reinterpret_cast<const float4*>(p), b = *reinterpret_cast<const float4*>(p + 4);
  return {{a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w}};
}
__device__ __forceinline__ float8 load8(const bf16* p) {
  const uint4 raw = *reinterpret_cast<const uint4*>(p);
  const unsigned words[4] = {raw.x, raw.y, raw.z, raw.w};
  float8 out;
  for (int k = 0; k < 4; ++k) {
    const __nv_bfloat162 pair = *reinterpret_cast<const __nv_bfloat162*>(&words[k]);
    out.v[2 * k] = __low2float(pair);
    out.v[2 * k + 1] = __high2float(pair);
  }
  return out;
}

__device__ __forceinline__ void store8(float* p, const float8& x) {
  *reinterpret_cast<float4*>(p) = make_float4(x.v[0], x.v[1], x.v[2], x.v[3]);
  *reinterpret_cast<float4*>(p + 4) = make_float4(x.v[4], x.v[5], x.v[6], x.v[7]);
}
__device__ __forceinline__ void store8(bf16* p, const float8& x) {
  unsigned words[4];
  for (int k = 0; k < 4; ++k) {
    const __nv_bfloat162 pair = __floats2bfloat162_rn(x.v[2 * k], x.v[2 * k + 1]);
    words[k] = *reinterpret_cast<const unsigned*>(&pair);
  }
  *reinterpret_cast<uint4*>(p) = make_uint4(words[0], words[1], words[2], words[3]);
}

/// The stored master value (p rounded to P) in C's storage.
template <class P, class C>
__device__ __forceinline__ C copy_of(float p) {
  return from_float<C>(to_float(from_float<P>(p)));
}

/// Elements [first, n) one at a time, the grid striding over them.
template <class P, class G, class M, class V, class C>
__device__ __forceinline__ void adamw_scalar_range(const adamw_scalars& h, P* param, const G* grad, M* exp_avg,
                                                   V* exp_avg_sq, C* copy, std::int64_t first, std::int64_t n) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = first + static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    float p = to_float(param[i]), m = to_float(exp_avg[i]), v = to_float(exp_avg_sq[i]);
    adamw_element(h, to_float(grad[i]), p, m, v);
    exp_avg[i] = from_float<M>(m);
    exp_avg_sq[i] = from_float<V>(v);
    param[i] = from_float<P>(p);
    if constexpr (!std::is_same_v<C, no_copy>) copy[i] = copy_of<P, C>(p);
  }
}

/// The step over n elements: groups of 8 through vector loads when `vectorised`, then the rest.
template <class P, class G, class M, class V, class C>
__global__ void __launch_bounds__(threads) adamw_kernel(adamw_scalars h, P* __restrict__ param,
                                                        const G* __restrict__ grad, M* __restrict__ exp_avg,
                                                        V* __restrict__ exp_avg_sq, C* __restrict__ copy,
                                                        std::int64_t n, bool vectorised) {
  std::int64_t scalar_from = 0;
  if (vectorised) {
    const std::int64_t groups = n / vector;
    const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
    for (std::int64_t q = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; q < groups; q += stride) {
      const std::int64_t i = q * vector;
      const float8 g = load8(grad + i);
      float8 p = load8(param + i), m = load8(exp_avg + i), v = load8(exp_avg_sq + i);
#pragma unroll
      for (int k = 0; k < vector; ++k) adamw_element(h, g.v[k], p.v[k], m.v[k], v.v[k]);
      store8(exp_avg + i, m);
      store8(exp_avg_sq + i, v);
      store8(param + i, p);
      if constexpr (!std::is_same_v<C, no_copy>) {
        float8 c;
#pragma unroll
        for (int k = 0; k < vector; ++k) c.v[k] = to_float(from_float<P>(p.v[k]));
        store8(copy + i, c);
      }
    }
    scalar_from = groups * vector;
  }
  adamw_scalar_range(h, param, grad, exp_avg, exp_avg_sq, copy, scalar_from, n);
}

/// Calls f(S{}) for a float32 or bfloat16 tensor (the public checks admit no other dtype).
template <class F>
status with_type(const tensor& t, F&& f) {
  return t.type() == dtype::bfloat16 ? f(bf16{}) : f(float{});
}

bool aligned(const void* p, std::size_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

}  // namespace

// ---------------------------------------------------------------------------------------------
// launchers

status adamw_step(const exec_context& ctx, dtype storage, const tensor& param, const tensor& grad, const tensor& exp_avg,
                  const tensor& exp_avg_sq, const adamw_hyper& hyper, const tensor& model_copy) {
  constexpr const char* op = "adamw_step";
  TANDEM_RETURN_IF_ERROR(require(storage == dtype::float32 || storage == dtype::bfloat16, op,
                                 "grad: the CUDA backend takes a float32 or bfloat16 gradient, got " + grad.describe()));
  TANDEM_RETURN_IF_ERROR(use_device(ctx));
  const std::int64_t n = param.numel();
  if (n == 0) return status::ok();
  const auto step = static_cast<double>(hyper.step);
  const adamw_scalars h{static_cast<float>(hyper.beta1),
                        static_cast<float>(hyper.beta2),
                        static_cast<float>(1.0 - hyper.beta1),
                        static_cast<float>(1.0 - hyper.beta2),
                        static_cast<float>(1.0 - std::pow(hyper.beta1, step)),
                        static_cast<float>(1.0 - std::pow(hyper.beta2, step)),
                        static_cast<float>(1.0 - hyper.lr * hyper.weight_decay),
                        static_cast<float>(hyper.lr),
                        static_cast<float>(hyper.eps),
                        static_cast<float>(hyper.grad_scale)};
  // Every operand aligned to its own 8-element group: 32 bytes for float32, 16 for bfloat16.
  bool vectorised = aligned(grad.data(), vector * size_of(grad.type()));
  for (const tensor* t : {&param, &exp_avg, &exp_avg_sq, &model_copy})
    if (!t->empty()) vectorised = vectorised && aligned(t->data(), vector * size_of(t->type()));
  const unsigned blocks = blocks_for(vectorised ? (n + vector - 1) / vector : n, threads);
  const cudaStream_t stream = stream_of(ctx);
  return with_type(grad, [&](auto g_zero) {
   using G = decltype(g_zero);
   return with_type(param, [&](auto p_zero) {
    using P = decltype(p_zero);
    return with_type(exp_avg, [&](auto m_zero) {
      using M = decltype(m_zero);
      return with_type(exp_avg_sq, [&](auto v_zero) {
        using V = decltype(v_zero);
        auto launch = [&](auto c_zero) {
          using C = decltype(c_zero);
          C* copy = model_copy.empty() ? nullptr : model_copy.as<C>();
          adamw_kernel<P, G, M, V, C><<<blocks, threads, 0, stream>>>(h, param.as<P>(), grad.as<const G>(),
                                                                   exp_avg.as<M>(), exp_avg_sq.as<V>(), copy, n,
                                                                   vectorised);
          return launch_status(op, "adamw_kernel");
        };
        if (model_copy.empty()) return launch(no_copy{});
        return with_type(model_copy, launch);
      });
    });
   });
  });
}

}  // namespace tandem::gpu::ops::cuda
