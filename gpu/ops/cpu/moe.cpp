// CPU reference of the MoE block: router (scale-less RMSNorm, projection, softmax, top-k) and
// grouped experts (gather, GEMM per expert, scatter-add in ascending expert order), with backward.
// Reductions of the float32 path (mean of squares, softmax and top-k sums, dot products of the
// backward) are accumulated in double; GEMMs run in the compute dtype through OpenBLAS.
#include "gpu/ops/cpu/moe.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "gpu/ops/cpu/gated_mlp.h"  // gelu_tanh, gelu_tanh_derivative: one definition for dense and experts
#include "gpu/ops/cpu/gemm.h"
#include "gpu/ops/cpu/parallel.h"

namespace tandem::gpu::ops::cpu {
namespace {

/// u = rmsnorm_noscale(x) * router_scale * H^(-1/2), the router's normed input, with the per-token
/// inverse rms (mean(x²) + eps)^(-1/2) (scale-less RMSNorm: no weight of its own, eps inside).
/// With `given_inv_rms` the stored values are used instead of recomputing them.
template <class T>
void router_input(const moe_dims& d, const T* x, const T* router_scale, T eps, const T* given_inv_rms, T* inv_rms,
                  T* u) {
  const std::int64_t h = d.hidden;
  const T root = T(1.0 / std::sqrt(static_cast<double>(h)));
#pragma omp parallel for if (parallel_worth(d.tokens * h))
  for (std::int64_t t = 0; t < d.tokens; ++t) {
    const T* xr = x + t * h;
    T r;
    if (given_inv_rms) {
      r = given_inv_rms[t];
    } else {
      double squares = 0;
      for (std::int64_t i = 0; i < h; ++i) squares += static_cast<double>(xr[i]) * xr[i];
      r = std::pow(T(squares / static_cast<double>(h)) + eps, T(-0.5));
      if (inv_rms) inv_rms[t] = r;
    }
    for (std::int64_t i = 0; i < h; ++i) u[t * h + i] = xr[i] * r * router_scale[i] * root;
  }
}

/// Slots (t * K + k) grouped by expert: expert e owns slots[offsets[e] .. offsets[e + 1]), ascending.
struct expert_groups {
  std::vector<std::int64_t> offsets;
  std::vector<std::int64_t> slots;
};

expert_groups group_by_expert(const moe_dims& d, const std::int32_t* indices) {
  const std::int64_t n_slots = d.tokens * d.top_k;
  expert_groups g{std::vector<std::int64_t>(static_cast<std::size_t>(d.experts + 1), 0),
                  std::vector<std::int64_t>(static_cast<std::size_t>(n_slots))};
  for (std::int64_t s = 0; s < n_slots; ++s) ++g.offsets[static_cast<std::size_t>(indices[s] + 1)];
  std::partial_sum(g.offsets.begin(), g.offsets.end(), g.offsets.begin());
  std::vector<std::int64_t> next(g.offsets.begin(), g.offsets.end() - 1);
  for (std::int64_t s = 0; s < n_slots; ++s) g.slots[static_cast<std::size_t>(next[indices[s]]++)] = s;
  return g;
}

/// dst[t] (= or +=) Σ_k rows[t * K + k] over token t's slots in ascending (expert, slot) order:
/// the scatter-add of the grouped experts, deterministic and parallel over tokens.
template <class T>
void add_slots_in_expert_order(const moe_dims& d, const std::int32_t* indices, const std::vector<T>& rows, T* dst,
                               bool accumulate) {
  const std::int64_t h = d.hidden, k = d.top_k;
#pragma omp parallel for if (parallel_worth(d.tokens * h))
  for (std::int64_t t = 0; t < d.tokens; ++t) {
    std::vector<std::int64_t> order(static_cast<std::size_t>(k));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::int64_t a, std::int64_t b) { return indices[t * k + a] < indices[t * k + b]; });
    T* o = dst + t * h;
    if (!accumulate) std::fill(o, o + h, T(0));
    for (const std::int64_t s : order) {
      const T* row = rows.data() + (t * k + s) * h;
      for (std::int64_t i = 0; i < h; ++i) o[i] += row[i];
    }
  }
}

/// One expert's routed rows: y gathered [c, H], gu = y · gate_upᵀ [c, 2 Im], a = gelu_tanh(gate) ⊙ up [c, Im].
template <class T>
struct expert_rows {
  std::vector<T> y, gu, a;
};

template <class T>
void expert_activations(const moe_dims& d, const T* y, const T* gate_up_e, const std::int64_t* slots, std::int64_t c,
                        expert_rows<T>& r) {
  const std::int64_t h = d.hidden, im = d.intermediate;
  r.y.resize(static_cast<std::size_t>(c * h));
  r.gu.resize(static_cast<std::size_t>(c * 2 * im));
  r.a.resize(static_cast<std::size_t>(c * im));
#pragma omp parallel for if (parallel_worth(c * h))
  for (std::int64_t j = 0; j < c; ++j) std::copy_n(y + (slots[j] / d.top_k) * h, h, r.y.data() + j * h);
  gemm<T>(false, true, c, 2 * im, h, T(1), r.y.data(), h, gate_up_e, h, T(0), r.gu.data(), 2 * im);
#pragma omp parallel for if (parallel_worth(c * im))
  for (std::int64_t j = 0; j < c; ++j)
    for (std::int64_t i = 0; i < im; ++i) r.a[j * im + i] = gelu_tanh(r.gu[j * 2 * im + i]) * r.gu[j * 2 * im + im + i];
}

}  // namespace

template <class T>
void moe_router_forward(const moe_dims& d, const T* x, const T* router_scale, const T* proj, const T* per_expert_scale,
                        T eps, T* weights, std::int32_t* indices, T* renormalized, T* inv_rms) {
  const std::int64_t n = d.tokens, h = d.hidden, e = d.experts, k = d.top_k;
  std::vector<T> u(static_cast<std::size_t>(n * h)), probs(static_cast<std::size_t>(n * e));
  router_input<T>(d, x, router_scale, eps, nullptr, inv_rms, u.data());
  gemm<T>(false, true, n, e, h, T(1), u.data(), h, proj, h, T(0), probs.data(), e);  // logits
#pragma omp parallel for if (parallel_worth(n * e))
  for (std::int64_t t = 0; t < n; ++t) {
    T* p = probs.data() + t * e;
    const T max = *std::max_element(p, p + e);
    double sum = 0;
    for (std::int64_t j = 0; j < e; ++j) sum += (p[j] = std::exp(p[j] - max));
    for (std::int64_t j = 0; j < e; ++j) p[j] = p[j] / T(sum);
    // Top-k by probability: slot s takes the largest remaining; on equal values the lower index.
    std::vector<char> taken(static_cast<std::size_t>(e), 0);
    std::int32_t* idx = indices + t * k;
    double selected = 0;
    for (std::int64_t s = 0; s < k; ++s) {
      std::int64_t best = -1;
      for (std::int64_t j = 0; j < e; ++j)
        if (!taken[static_cast<std::size_t>(j)] && (best < 0 || p[j] > p[best])) best = j;
      taken[static_cast<std::size_t>(best)] = 1;
      idx[s] = static_cast<std::int32_t>(best);
      selected += p[best];
    }
    for (std::int64_t s = 0; s < k; ++s) {
      const T r = p[idx[s]] / T(selected);
      if (renormalized) renormalized[t * k + s] = r;
      weights[t * k + s] = r * per_expert_scale[idx[s]];
    }
  }
}

template <class T>
void moe_router_backward(const moe_dims& d, const T* x, const T* router_scale, const T* proj, const T* per_expert_scale,
                         const std::int32_t* indices, const T* renormalized, const T* inv_rms, const T* dweights, T* dx,
                         bool accumulate_dx, T* dproj, T* drouter_scale, T* dper_expert_scale) {
  const std::int64_t n = d.tokens, h = d.hidden, e = d.experts, k = d.top_k;
  // dlogit[e_k] = r_k (g_k - Σ_j r_j g_j), g_k = per_expert_scale[e_k] · dweights_k (softmax over the selected).
  std::vector<T> dlogit(static_cast<std::size_t>(n * e), T(0));
#pragma omp parallel for if (parallel_worth(n * e * h))
  for (std::int64_t t = 0; t < n; ++t) {
    const std::int32_t* idx = indices + t * k;
    double mean_g = 0;
    for (std::int64_t j = 0; j < k; ++j)
      mean_g += static_cast<double>(renormalized[t * k + j]) * per_expert_scale[idx[j]] * dweights[t * k + j];
    for (std::int64_t j = 0; j < k; ++j) {
      const double g = static_cast<double>(per_expert_scale[idx[j]]) * dweights[t * k + j];
      dlogit[static_cast<std::size_t>(t * e + idx[j])] += T(renormalized[t * k + j] * (g - mean_g));
    }
  }
  if (dper_expert_scale) {
    std::vector<double> acc(static_cast<std::size_t>(e), 0.0);
    for (std::int64_t s = 0; s < n * k; ++s)
      acc[static_cast<std::size_t>(indices[s])] += static_cast<double>(renormalized[s]) * dweights[s];
    for (std::int64_t j = 0; j < e; ++j) dper_expert_scale[j] += T(acc[static_cast<std::size_t>(j)]);
  }
  if (!dx && !dproj && !drouter_scale) return;
  const double root = 1.0 / std::sqrt(static_cast<double>(h));
  if (dproj) {  // dproj += dlogitᵀ · u
    std::vector<T> u(static_cast<std::size_t>(n * h));
    router_input<T>(d, x, router_scale, T(0), inv_rms, nullptr, u.data());
    gemm<T>(true, false, e, h, n, T(1), dlogit.data(), e, u.data(), h, T(1), dproj, h);
  }
  if (!dx && !drouter_scale) return;
  std::vector<T> du(static_cast<std::size_t>(n * h));  // du = dlogit · proj
  gemm<T>(false, false, n, h, e, T(1), dlogit.data(), e, proj, h, T(0), du.data(), h);
  if (drouter_scale) {  // d scale_i += Σ_t du_ti · n_ti · H^(-1/2), n = x · inv_rms
#pragma omp parallel for if (parallel_worth(h * n))
    for (std::int64_t i = 0; i < h; ++i) {
      double acc = 0;
      for (std::int64_t t = 0; t < n; ++t) acc += static_cast<double>(du[t * h + i]) * (x[t * h + i] * inv_rms[t]);
      drouter_scale[i] += T(acc * root);
    }
  }
  if (dx) {  // scale-less RMSNorm backward: dx = r (dn - n · (dn·n) / H), dn = du · scale · H^(-1/2)
#pragma omp parallel for if (parallel_worth(n * h))
    for (std::int64_t t = 0; t < n; ++t) {
      const double r = inv_rms[t];
      double dot = 0;
      for (std::int64_t i = 0; i < h; ++i)
        dot += static_cast<double>(du[t * h + i]) * router_scale[i] * root * (x[t * h + i] * r);
      for (std::int64_t i = 0; i < h; ++i) {
        const double dn = static_cast<double>(du[t * h + i]) * router_scale[i] * root;
        const T v = T(r * (dn - x[t * h + i] * r * dot / static_cast<double>(h)));
        dx[t * h + i] = accumulate_dx ? dx[t * h + i] + v : v;
      }
    }
  }
}

template <class T>
void moe_experts_forward(const moe_dims& d, const T* y, const T* gate_up, const T* down, const T* weights,
                         const std::int32_t* indices, T* out) {
  const std::int64_t h = d.hidden, im = d.intermediate;
  const expert_groups groups = group_by_expert(d, indices);
  std::vector<T> slot_out(static_cast<std::size_t>(d.tokens * d.top_k * h)), o;
  expert_rows<T> rows;
  for (std::int64_t ex = 0; ex < d.experts; ++ex) {
    const std::int64_t c =
        groups.offsets[static_cast<std::size_t>(ex + 1)] - groups.offsets[static_cast<std::size_t>(ex)];
    if (c == 0) continue;
    const std::int64_t* slots = groups.slots.data() + groups.offsets[static_cast<std::size_t>(ex)];
    expert_activations<T>(d, y, gate_up + ex * 2 * im * h, slots, c, rows);
    o.resize(static_cast<std::size_t>(c * h));
    gemm<T>(false, true, c, h, im, T(1), rows.a.data(), im, down + ex * h * im, im, T(0), o.data(), h);
#pragma omp parallel for if (parallel_worth(c * h))
    for (std::int64_t j = 0; j < c; ++j)
      for (std::int64_t i = 0; i < h; ++i)
        slot_out[static_cast<std::size_t>(slots[j] * h + i)] = weights[slots[j]] * o[j * h + i];
  }
  add_slots_in_expert_order(d, indices, slot_out, out, false);
}

template <class T>
void moe_experts_backward(const moe_dims& d, const T* y, const T* gate_up, const T* down, const T* weights,
                          const std::int32_t* indices, const T* dout, T* dy, bool accumulate_dy, T* dgate_up, T* ddown,
                          T* dweights) {
  const std::int64_t h = d.hidden, im = d.intermediate, k = d.top_k;
  const expert_groups groups = group_by_expert(d, indices);
  std::vector<T> slot_dy(dy ? static_cast<std::size_t>(d.tokens * k * h) : 0), o, d_o, d_a, d_gu, d_y;
  expert_rows<T> rows;
  for (std::int64_t ex = 0; ex < d.experts; ++ex) {
    const std::int64_t c =
        groups.offsets[static_cast<std::size_t>(ex + 1)] - groups.offsets[static_cast<std::size_t>(ex)];
    if (c == 0) continue;
    const std::int64_t* slots = groups.slots.data() + groups.offsets[static_cast<std::size_t>(ex)];
    const T* gate_up_e = gate_up + ex * 2 * im * h;
    const T* down_e = down + ex * h * im;
    expert_activations<T>(d, y, gate_up_e, slots, c, rows);
    if (dweights) {  // dweights[t, k] = dout[t] · o_e(y[t])
      o.resize(static_cast<std::size_t>(c * h));
      gemm<T>(false, true, c, h, im, T(1), rows.a.data(), im, down_e, im, T(0), o.data(), h);
#pragma omp parallel for if (parallel_worth(c * h))
      for (std::int64_t j = 0; j < c; ++j) {
        double acc = 0;
        for (std::int64_t i = 0; i < h; ++i) acc += static_cast<double>(dout[(slots[j] / k) * h + i]) * o[j * h + i];
        dweights[slots[j]] = T(acc);
      }
    }
    if (!ddown && !dgate_up && !dy) continue;
    d_o.resize(static_cast<std::size_t>(c * h));  // d o_e = weight · dout[t]
#pragma omp parallel for if (parallel_worth(c * h))
    for (std::int64_t j = 0; j < c; ++j)
      for (std::int64_t i = 0; i < h; ++i) d_o[j * h + i] = weights[slots[j]] * dout[(slots[j] / k) * h + i];
    if (ddown) gemm<T>(true, false, h, im, c, T(1), d_o.data(), h, rows.a.data(), im, T(1), ddown + ex * h * im, im);
    if (!dgate_up && !dy) continue;
    d_a.resize(static_cast<std::size_t>(c * im));
    gemm<T>(false, false, c, im, h, T(1), d_o.data(), h, down_e, im, T(0), d_a.data(), im);
    d_gu.resize(static_cast<std::size_t>(c * 2 * im));  // d gate = da ⊙ up ⊙ gelu'(gate), d up = da ⊙ gelu(gate)
#pragma omp parallel for if (parallel_worth(c * im))
    for (std::int64_t j = 0; j < c; ++j)
      for (std::int64_t i = 0; i < im; ++i) {
        const T g = rows.gu[j * 2 * im + i], u = rows.gu[j * 2 * im + im + i], da = d_a[j * im + i];
        d_gu[j * 2 * im + i] = da * u * gelu_tanh_derivative(g);
        d_gu[j * 2 * im + im + i] = da * gelu_tanh(g);
      }
    if (dgate_up)
      gemm<T>(true, false, 2 * im, h, c, T(1), d_gu.data(), 2 * im, rows.y.data(), h, T(1), dgate_up + ex * 2 * im * h,
              h);
    if (dy) {
      d_y.resize(static_cast<std::size_t>(c * h));
      gemm<T>(false, false, c, h, 2 * im, T(1), d_gu.data(), 2 * im, gate_up_e, h, T(0), d_y.data(), h);
#pragma omp parallel for if (parallel_worth(c * h))
      for (std::int64_t j = 0; j < c; ++j) std::copy_n(d_y.data() + j * h, h, slot_dy.data() + slots[j] * h);
    }
  }
  if (dy) add_slots_in_expert_order(d, indices, slot_dy, dy, accumulate_dy);
}

#define TANDEM_MOE_INSTANTIATE(T)                                                                                     \
  template void moe_router_forward<T>(const moe_dims&, const T*, const T*, const T*, const T*, T, T*, std::int32_t*,  \
                                      T*, T*);                                                                        \
  template void moe_router_backward<T>(const moe_dims&, const T*, const T*, const T*, const T*, const std::int32_t*,  \
                                       const T*, const T*, const T*, T*, bool, T*, T*, T*);                           \
  template void moe_experts_forward<T>(const moe_dims&, const T*, const T*, const T*, const T*, const std::int32_t*,  \
                                       T*);                                                                           \
  template void moe_experts_backward<T>(const moe_dims&, const T*, const T*, const T*, const T*, const std::int32_t*, \
                                        const T*, T*, bool, T*, T*, T*);
TANDEM_MOE_INSTANTIATE(float)
TANDEM_MOE_INSTANTIATE(double)
#undef TANDEM_MOE_INSTANTIATE

}  // namespace tandem::gpu::ops::cpu
