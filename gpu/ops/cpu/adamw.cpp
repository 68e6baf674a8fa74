// CPU kernel of the AdamW step: element-wise, compute in T, storage dtypes per operand.
#include "gpu/ops/cpu/adamw.h"

#include <cmath>
#include <cstdint>

#include "gpu/core/half.h"
#include "gpu/ops/cpu/parallel.h"

namespace tandem::gpu::ops::cpu {
namespace {

/// Element i of a float32, float64 or bfloat16 view, widened to T.
template <class T>
T load(const tensor& t, std::int64_t i) {
  switch (t.type()) {
    case dtype::float32: return static_cast<T>(t.as<const float>()[i]);
    case dtype::float64: return static_cast<T>(t.as<const double>()[i]);
    case dtype::bfloat16: return static_cast<T>(to_float(t.as<const bfloat16>()[i]));
    default: return T(0);  // excluded by the argument checks
  }
}

/// Stores v into element i, rounding to the view's dtype (bfloat16: nearest even, via float).
template <class T>
void store(const tensor& t, std::int64_t i, T v) {
  switch (t.type()) {
    case dtype::float32: t.as<float>()[i] = static_cast<float>(v); break;
    case dtype::float64: t.as<double>()[i] = static_cast<double>(v); break;
    case dtype::bfloat16: t.as<bfloat16>()[i] = to_bfloat16(static_cast<float>(v)); break;
    default: break;  // excluded by the argument checks
  }
}

}  // namespace

template <class T>
void adamw_step(const tensor& param, const tensor& grad, const tensor& exp_avg, const tensor& exp_avg_sq,
                const adamw_hyper& hyper, const tensor& model_copy) {
  const auto step = static_cast<double>(hyper.step);
  const T beta1 = static_cast<T>(hyper.beta1);
  const T beta2 = static_cast<T>(hyper.beta2);
  const T one_minus_beta1 = static_cast<T>(1.0 - hyper.beta1);
  const T one_minus_beta2 = static_cast<T>(1.0 - hyper.beta2);
  const T correction1 = static_cast<T>(1.0 - std::pow(hyper.beta1, step));
  const T correction2 = static_cast<T>(1.0 - std::pow(hyper.beta2, step));
  const T decay = static_cast<T>(1.0 - hyper.lr * hyper.weight_decay);
  const T lr = static_cast<T>(hyper.lr);
  const T eps = static_cast<T>(hyper.eps);
  const T grad_scale = static_cast<T>(hyper.grad_scale);
  const bool copy = !model_copy.empty();
  const std::int64_t n = param.numel();

#pragma omp parallel for schedule(static) if (parallel_worth(n * 8))
  for (std::int64_t i = 0; i < n; ++i) {
    const T g = grad_scale * load<T>(grad, i);
    const T m = beta1 * load<T>(exp_avg, i) + one_minus_beta1 * g;
    const T v = beta2 * load<T>(exp_avg_sq, i) + one_minus_beta2 * (g * g);
    const T m_hat = m / correction1;
    const T v_hat = v / correction2;
    T p = load<T>(param, i) * decay;
    p = p - lr * (m_hat / (std::sqrt(v_hat) + eps));
    store(exp_avg, i, m);
    store(exp_avg_sq, i, v);
    store(param, i, p);
    if (copy) store(model_copy, i, load<T>(param, i));  // the stored (rounded) master value
  }
}

template void adamw_step<float>(const tensor&, const tensor&, const tensor&, const tensor&, const adamw_hyper&,
                                const tensor&);
template void adamw_step<double>(const tensor&, const tensor&, const tensor&, const tensor&, const adamw_hyper&,
                                 const tensor&);

}  // namespace tandem::gpu::ops::cpu
