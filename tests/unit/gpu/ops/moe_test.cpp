// MoE block (router and experts): float32 against the float64 reference, an independent loop
// reference, hand-computed tiny cases, backward against finite differences with the top-k choice
// fixed (every test input keeps a wide margin between the K-th and (K+1)-th probability), gradient
// accumulation, and argument errors.
#include "gpu/ops/moe.h"

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <functional>
#include <vector>

#include "support/op_harness.h"

#include "gpu/core/exec_context.h"

namespace {
// Every op of this file runs on the CPU, on the calling thread.
const tandem::gpu::exec_context ctx = tandem::gpu::exec_context::cpu();
// A context on a GPU, for the checks that refuse what no backend runs yet.
const tandem::gpu::exec_context cuda_ctx{tandem::gpu::device::cuda(0), {}, nullptr};
}  // namespace

using namespace tandem::gpu;
using namespace tandem::test;

namespace {

constexpr std::int64_t n_tokens = 6, hidden = 8, n_experts = 4, top_k = 2, inter = 6;

double gelu_tanh(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }

struct router_inputs {
  host_buffer x, scale, proj, per_expert_scale;
};

router_inputs random_router(std::int64_t n, std::int64_t h, std::int64_t e, std::uint64_t seed) {
  return {random_buffer(dtype::float64, {n, h}, seed), random_buffer(dtype::float64, {h}, seed + 1, 0.5, 1.5),
          random_buffer(dtype::float64, {e, h}, seed + 2, -3, 3),
          random_buffer(dtype::float64, {e}, seed + 3, 0.5, 1.5)};
}

struct router_outputs {
  host_buffer weights, indices, renormalized, inv_rms;
};

router_outputs run_router(const router_inputs& in, dtype type, std::int64_t k, double eps = 1e-6) {
  const std::int64_t n = in.x.shape()[0];
  router_outputs o{host_buffer(type, {n, k}), host_buffer(dtype::int32, {n, k}), host_buffer(type, {n, k}),
                   host_buffer(type, {n})};
  const status s = ops::moe_router_forward(ctx, converted(in.x, type), converted(in.scale, type), converted(in.proj, type),
                                           converted(in.per_expert_scale, type), o.weights, o.indices, o.renormalized,
                                           o.inv_rms, eps);
  BOOST_TEST_REQUIRE(s.is_ok(), s.message());
  return o;
}

/// Softmax over all experts of the router logits, written out independently in float64 [N][E].
std::vector<std::vector<double>> reference_probabilities(const router_inputs& in, double eps = 1e-6) {
  const std::int64_t n = in.x.shape()[0], h = in.x.shape()[1], e = in.proj.shape()[0];
  std::vector<std::vector<double>> p(static_cast<std::size_t>(n));
  for (std::int64_t t = 0; t < n; ++t) {
    double ms = 0;
    for (std::int64_t i = 0; i < h; ++i) ms += value_at(in.x, t * h + i) * value_at(in.x, t * h + i) / h;
    double sum = 0;
    for (std::int64_t j = 0; j < e; ++j) {
      double logit = 0;
      for (std::int64_t i = 0; i < h; ++i)
        logit += value_at(in.x, t * h + i) / std::sqrt(ms + eps) * value_at(in.scale, i) / std::sqrt(double(h)) *
                 value_at(in.proj, j * h + i);
      p[static_cast<std::size_t>(t)].push_back(std::exp(logit));
      sum += std::exp(logit);
    }
    for (double& v : p[static_cast<std::size_t>(t)]) v /= sum;
  }
  return p;
}

/// The smallest gap, over tokens, between the K-th and (K+1)-th largest probability.
double smallest_top_k_margin(const router_inputs& in, std::int64_t k) {
  double margin = 1;
  for (auto p : reference_probabilities(in)) {
    std::sort(p.begin(), p.end(), std::greater<>());
    margin = std::min(margin, p[static_cast<std::size_t>(k - 1)] - p[static_cast<std::size_t>(k)]);
  }
  return margin;
}

struct experts_inputs {
  host_buffer y, gate_up, down, weights, indices;
};

/// Distinct experts per token, drawn from the first `usable` experts.
host_buffer distinct_indices(std::int64_t n, std::int64_t k, std::int32_t usable, std::uint64_t seed) {
  host_buffer idx(dtype::int32, {n, k});
  const auto draws = random_indices({n, usable}, seed, 0, 1 << 20);
  for (std::int64_t t = 0; t < n; ++t) {
    std::vector<std::int32_t> order(static_cast<std::size_t>(usable));
    for (std::int32_t j = 0; j < usable; ++j) order[static_cast<std::size_t>(j)] = j;
    std::sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
      return draws.data<std::int32_t>()[t * usable + a] < draws.data<std::int32_t>()[t * usable + b];
    });
    std::copy_n(order.begin(), k, idx.data<std::int32_t>() + t * k);
  }
  return idx;
}

experts_inputs random_experts(std::int64_t n, std::int32_t usable, std::uint64_t seed) {
  return {random_buffer(dtype::float64, {n, hidden}, seed),
          random_buffer(dtype::float64, {n_experts, 2 * inter, hidden}, seed + 1),
          random_buffer(dtype::float64, {n_experts, hidden, inter}, seed + 2),
          random_buffer(dtype::float64, {n, top_k}, seed + 3, 0.1, 1.0), distinct_indices(n, top_k, usable, seed + 4)};
}

host_buffer run_experts(const experts_inputs& in, dtype type) {
  host_buffer out(type, {in.y.shape()[0], in.y.shape()[1]});
  for (std::int64_t i = 0; i < out.numel(); ++i) set_value(out, i, 7.0);  // out is written, not added to
  const status s = ops::moe_experts_forward(ctx, converted(in.y, type), converted(in.gate_up, type),
                                            converted(in.down, type), converted(in.weights, type), in.indices, out);
  BOOST_TEST_REQUIRE(s.is_ok(), s.message());
  return out;
}

/// out[t] = Σ_k w · down[e] · (gelu_tanh(gate[e] · y[t]) ⊙ (up[e] · y[t])), token by token.
host_buffer loop_reference(const experts_inputs& in) {
  const std::int64_t n = in.y.shape()[0], h = in.y.shape()[1], k = in.weights.shape()[1];
  const std::int64_t im = in.down.shape()[2];
  host_buffer out(dtype::float64, {n, h});
  for (std::int64_t t = 0; t < n; ++t)
    for (std::int64_t s = 0; s < k; ++s) {
      const std::int64_t e = in.indices.data<std::int32_t>()[t * k + s];
      std::vector<double> a(static_cast<std::size_t>(im));
      for (std::int64_t j = 0; j < im; ++j) {
        double g = 0, u = 0;
        for (std::int64_t i = 0; i < h; ++i) {
          g += value_at(in.gate_up, (e * 2 * im + j) * h + i) * value_at(in.y, t * h + i);
          u += value_at(in.gate_up, (e * 2 * im + im + j) * h + i) * value_at(in.y, t * h + i);
        }
        a[static_cast<std::size_t>(j)] = gelu_tanh(g) * u;
      }
      for (std::int64_t i = 0; i < h; ++i) {
        double o = 0;
        for (std::int64_t j = 0; j < im; ++j)
          o += value_at(in.down, (e * h + i) * im + j) * a[static_cast<std::size_t>(j)];
        set_value(out, t * h + i, value_at(out, t * h + i) + value_at(in.weights, t * k + s) * o);
      }
    }
  return out;
}

host_buffer doubled(const host_buffer& b) {
  auto c = converted(b, b.type());
  for (std::int64_t i = 0; i < c.numel(); ++i) set_value(c, i, 2 * value_at(c, i));
  return c;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(moe_test)

BOOST_AUTO_TEST_CASE(router_forward_in_float32_matches_the_float64_reference_and_picks_the_top_k) {
  const auto in = random_router(n_tokens, hidden, n_experts, 10);
  BOOST_TEST_REQUIRE(smallest_top_k_margin(in, top_k) > 1e-2);
  const auto r64 = run_router(in, dtype::float64, top_k), r32 = run_router(in, dtype::float32, top_k);
  BOOST_TEST(r32.indices.to_vector<std::int32_t>() == r64.indices.to_vector<std::int32_t>(),
             boost::test_tools::per_element());
  expect_close(r32.weights, r64.weights, tolerance_for(dtype::float32), "weights");
  expect_close(r32.renormalized, r64.renormalized, tolerance_for(dtype::float32), "renormalized");
  expect_close(r32.inv_rms, r64.inv_rms, tolerance_for(dtype::float32), "inv_rms");
  // Against the independent softmax: slots hold the K most probable experts in descending order,
  // renormalised over the selection, then times per_expert_scale.
  const auto probs = reference_probabilities(in);
  for (std::int64_t t = 0; t < n_tokens; ++t) {
    auto p = probs[static_cast<std::size_t>(t)];
    std::vector<std::int32_t> order{0, 1, 2, 3};
    std::sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
    const double selected = p[order[0]] + p[order[1]];
    for (std::int64_t s = 0; s < top_k; ++s) {
      BOOST_TEST(r64.indices.data<std::int32_t>()[t * top_k + s] == order[s]);
      BOOST_TEST(
          value_at(r64.weights, t * top_k + s) == p[order[s]] / selected * value_at(in.per_expert_scale, order[s]),
          boost::test_tools::tolerance(1e-12));
    }
  }
}

BOOST_AUTO_TEST_CASE(router_weights_sum_to_one_times_the_per_expert_scales) {
  auto in = random_router(n_tokens, hidden, n_experts, 20);
  const auto scaled = run_router(in, dtype::float64, 3);
  for (std::int64_t t = 0; t < n_tokens; ++t) {
    double sum = 0, expected = 0, renorm = 0;
    for (std::int64_t s = 0; s < 3; ++s) {
      sum += value_at(scaled.weights, t * 3 + s);
      renorm += value_at(scaled.renormalized, t * 3 + s);
      expected += value_at(scaled.renormalized, t * 3 + s) *
                  value_at(in.per_expert_scale, scaled.indices.data<std::int32_t>()[t * 3 + s]);
    }
    BOOST_TEST(renorm == 1.0, boost::test_tools::tolerance(1e-15));
    BOOST_TEST(sum == expected, boost::test_tools::tolerance(1e-15));
  }
  for (std::int64_t j = 0; j < n_experts; ++j) set_value(in.per_expert_scale, j, 1.0);
  for (const dtype type : {dtype::float64, dtype::float32}) {
    const auto unit = run_router(in, type, 3);
    const double ulp = type == dtype::float64 ? 0x1p-52 : 0x1p-23;
    for (std::int64_t t = 0; t < n_tokens; ++t) {
      double sum = 0;
      for (std::int64_t s = 0; s < 3; ++s) sum += value_at(unit.weights, t * 3 + s);
      BOOST_TEST(std::abs(sum - 1.0) <= 2 * ulp, "token " << t << " sums to " << sum);
    }
  }
}

BOOST_AUTO_TEST_CASE(router_tiny_case_matches_hand_computed_values) {
  // x = [3, 4]: mean square 12.5 (eps 0), n = x / sqrt(12.5), u = n · 1 · 2^(-1/2) = [0.6, 0.8].
  // logits u · proj_e: e0 [1, 0] → 0.6, e1 [0, 1] → 0.8, e2 [-1, 0] → -0.6; top-2 = (e1, e0),
  // renormalised a = 1 / (1 + e^-0.2), b = 1 - a; per_expert_scale [2, 3, 5] → weights [3a, 2b].
  const router_inputs in{host_buffer::of<double>({1, 2}, {3, 4}), host_buffer::of<double>({2}, {1, 1}),
                         host_buffer::of<double>({3, 2}, {1, 0, 0, 1, -1, 0}), host_buffer::of<double>({3}, {2, 3, 5})};
  const auto r = run_router(in, dtype::float64, 2, 0.0);
  const double a = 1 / (1 + std::exp(-0.2)), b = 1 - a, tol = 1e-12;
  BOOST_TEST(r.indices.to_vector<std::int32_t>() == (std::vector<std::int32_t>{1, 0}),
             boost::test_tools::per_element());
  BOOST_TEST(value_at(r.weights, 0) == 3 * a, boost::test_tools::tolerance(tol));
  BOOST_TEST(value_at(r.weights, 1) == 2 * b, boost::test_tools::tolerance(tol));
  BOOST_TEST(value_at(r.inv_rms, 0) == 1 / std::sqrt(12.5), boost::test_tools::tolerance(tol));
  // dweights [1, 0]: g = [3, 0], Σ r g = 3a, dlogit_e1 = a(3 - 3a) = 3ab, dlogit_e0 = b(0 - 3a) = -3ab.
  // dproj_e1 = 3ab u, dproj_e0 = -3ab u; d per_expert_scale = [b · 0, a · 1, 0];
  // du = 3ab (proj_e1 - proj_e0) = 3ab [-1, 1]; d scale = du ⊙ n · 2^(-1/2) = 3ab [-0.6, 0.8];
  // dx = r (dn - n (dn · n) / 2) with dn = du / sqrt 2, r = sqrt(2) / 5: ab [-0.672, 0.504].
  host_buffer dx(dtype::float64, {1, 2}), dproj(dtype::float64, {3, 2}), dscale(dtype::float64, {2}),
      dpes(dtype::float64, {3});
  const auto dw = host_buffer::of<double>({1, 2}, {1, 0});
  BOOST_REQUIRE(ops::moe_router_backward(ctx, in.x, in.scale, in.proj, in.per_expert_scale, r.indices, r.renormalized,
                                         r.inv_rms, dw, dx, dproj, dscale, dpes)
                    .is_ok());
  const double ab = a * b;
  expect_close(dx, host_buffer::of<double>({1, 2}, {-0.672 * ab, 0.504 * ab}), {tol, tol}, "dx");
  expect_close(dproj, host_buffer::of<double>({3, 2}, {-1.8 * ab, -2.4 * ab, 1.8 * ab, 2.4 * ab, 0, 0}), {tol, tol},
               "dproj");
  expect_close(dscale, host_buffer::of<double>({2}, {-1.8 * ab, 2.4 * ab}), {tol, tol}, "drouter_scale");
  expect_close(dpes, host_buffer::of<double>({3}, {0, a, 0}), {tol, tol}, "dper_expert_scale");
}

BOOST_AUTO_TEST_CASE(equal_probabilities_go_to_the_lower_expert_index_first) {
  // Experts 1 and 3 have the same projection row, the largest logit; expert 0 is second, expert 2 last.
  const router_inputs in{host_buffer::of<double>({1, 2}, {3, 4}), host_buffer::of<double>({2}, {1, 1}),
                         host_buffer::of<double>({4, 2}, {1, 0, 0, 1, -1, 0, 0, 1}),
                         host_buffer::of<double>({4}, {1, 1, 1, 1})};
  for (const dtype type : {dtype::float64, dtype::float32})
    for (const std::int64_t k : {1, 2, 3}) {
      host_buffer w(type, {1, k}), idx(dtype::int32, {1, k});  // saved outputs skipped (inference)
      BOOST_REQUIRE(ops::moe_router_forward(ctx, converted(in.x, type), converted(in.scale, type), converted(in.proj, type),
                                            converted(in.per_expert_scale, type), w, idx, tensor{}, tensor{})
                        .is_ok());
      const std::vector<std::int32_t> expected{1, 3, 0};
      BOOST_TEST(idx.to_vector<std::int32_t>() == std::vector<std::int32_t>(expected.begin(), expected.begin() + k),
                 boost::test_tools::per_element());
    }
}

BOOST_AUTO_TEST_CASE(router_backward_matches_finite_differences_for_every_input) {
  const auto in = random_router(n_tokens, hidden, n_experts, 30);
  BOOST_TEST_REQUIRE(smallest_top_k_margin(in, top_k) > 1e-2);  // far above the step 1e-6
  const auto g = random_buffer(dtype::float64, {n_tokens, top_k}, 35);
  const auto r = run_router(in, dtype::float64, top_k);
  const auto loss = [&] {
    const auto now = run_router(in, dtype::float64, top_k);
    BOOST_TEST_REQUIRE(now.indices.to_vector<std::int32_t>() == r.indices.to_vector<std::int32_t>());
    return weighted_sum(now.weights, g);
  };
  host_buffer dx(dtype::float64, {n_tokens, hidden}), dproj(dtype::float64, {n_experts, hidden}),
      dscale(dtype::float64, {hidden}), dpes(dtype::float64, {n_experts});
  BOOST_REQUIRE(ops::moe_router_backward(ctx, in.x, in.scale, in.proj, in.per_expert_scale, r.indices, r.renormalized,
                                         r.inv_rms, g, dx, dproj, dscale, dpes)
                    .is_ok());
  check_gradient("dx", in.x, loss, dx);
  check_gradient("dproj", in.proj, loss, dproj);
  check_gradient("drouter_scale", in.scale, loss, dscale);
  check_gradient("dper_expert_scale", in.per_expert_scale, loss, dpes);
}

BOOST_AUTO_TEST_CASE(router_backward_accumulates_parameter_gradients_and_dx_on_request) {
  const auto in = random_router(n_tokens, hidden, n_experts, 40);
  const auto g = random_buffer(dtype::float64, {n_tokens, top_k}, 45);
  const auto r = run_router(in, dtype::float64, top_k);
  host_buffer dx(dtype::float64, {n_tokens, hidden}), dproj(dtype::float64, {n_experts, hidden}),
      dscale(dtype::float64, {hidden}), dpes(dtype::float64, {n_experts});
  const auto backward = [&](bool accumulate_dx) {
    BOOST_REQUIRE(ops::moe_router_backward(ctx, in.x, in.scale, in.proj, in.per_expert_scale, r.indices, r.renormalized,
                                           r.inv_rms, g, dx, dproj, dscale, dpes, accumulate_dx)
                      .is_ok());
  };
  backward(false);
  const auto dx1 = doubled(dx), dproj2 = doubled(dproj), dscale2 = doubled(dscale), dpes2 = doubled(dpes);
  const auto dx_once = converted(dx, dtype::float64);
  backward(true);
  expect_close(dx, dx1, tolerance_for(dtype::float64), "dx accumulated");
  expect_close(dproj, dproj2, tolerance_for(dtype::float64), "dproj twice");
  expect_close(dscale, dscale2, tolerance_for(dtype::float64), "drouter_scale twice");
  expect_close(dpes, dpes2, tolerance_for(dtype::float64), "dper_expert_scale twice");
  backward(false);
  expect_close(dx, dx_once, tolerance_for(dtype::float64), "dx written");
}

BOOST_AUTO_TEST_CASE(router_backward_in_float32_matches_the_float64_reference) {
  const auto in = random_router(n_tokens, hidden, n_experts, 50);
  const auto g = random_buffer(dtype::float64, {n_tokens, top_k}, 55);
  std::vector<host_buffer> grads[2];
  for (const dtype type : {dtype::float64, dtype::float32}) {
    const auto r = run_router(in, type, top_k);
    host_buffer dx(type, {n_tokens, hidden}), dproj(type, {n_experts, hidden}), dscale(type, {hidden}),
        dpes(type, {n_experts});
    BOOST_REQUIRE(ops::moe_router_backward(ctx, converted(in.x, type), converted(in.scale, type), converted(in.proj, type),
                                           converted(in.per_expert_scale, type), r.indices, r.renormalized, r.inv_rms,
                                           converted(g, type), dx, dproj, dscale, dpes)
                      .is_ok());
    grads[type == dtype::float32] = {dx, dproj, dscale, dpes};
  }
  const char* names[] = {"dx", "dproj", "drouter_scale", "dper_expert_scale"};
  for (int i = 0; i < 4; ++i) expect_close(grads[1][i], grads[0][i], tolerance_for(dtype::float32), names[i]);
}

BOOST_AUTO_TEST_CASE(experts_forward_matches_a_token_by_token_loop_and_float32_matches_float64) {
  const auto in = random_experts(n_tokens, 3, 60);  // expert 3 gets no token
  const auto out64 = run_experts(in, dtype::float64), out32 = run_experts(in, dtype::float32);
  expect_close(out64, loop_reference(in), tolerance_for(dtype::float64), "out vs loop");
  expect_close(out32, out64, tolerance_for(dtype::float32), "out float32");
}

BOOST_AUTO_TEST_CASE(experts_tiny_case_matches_hand_computed_values) {
  // y = [1, 2]; Im = 1. e0: gate [1, 0] → 1, up [0, 1] → 2, down [1, 2];
  // e2: gate [-1, 0] → -1, up [2, 0] → 2, down [3, 3]. indices [2, 0], weights [0.25, 0.75]:
  // out = 0.25 · gelu(-1) · 2 · [3, 3] + 0.75 · gelu(1) · 2 · [1, 2].
  const double g1 = 0.8411919906082768, gm1 = -0.15880800939172324;  // gelu_tanh(±1)
  BOOST_TEST(gelu_tanh(1) == g1, boost::test_tools::tolerance(1e-15));
  const experts_inputs in{host_buffer::of<double>({1, 2}, {1, 2}),
                          host_buffer::of<double>({3, 2, 2}, {1, 0, 0, 1, 0, 0.5, 1, 1, -1, 0, 2, 0}),
                          host_buffer::of<double>({3, 2, 1}, {1, 2, -1, 0.5, 3, 3}),
                          host_buffer::of<double>({1, 2}, {0.25, 0.75}), host_buffer::of<std::int32_t>({1, 2}, {2, 0})};
  const auto out = run_experts(in, dtype::float64);
  expect_close(out, host_buffer::of<double>({1, 2}, {1.5 * gm1 + 1.5 * g1, 1.5 * gm1 + 3 * g1}), {1e-14, 1e-14}, "out");
  // dout [1, 0]: dweights = [gelu(-1) · 2 · 3, gelu(1) · 2 · 1]; ddown[e0] += 0.75 · [1, 0]ᵀ · gelu(1) · 2.
  host_buffer dweights(dtype::float64, {1, 2}), ddown(dtype::float64, {3, 2, 1});
  BOOST_REQUIRE(ops::moe_experts_backward(ctx, in.y, in.gate_up, in.down, in.weights, in.indices,
                                          host_buffer::of<double>({1, 2}, {1, 0}), tensor{}, tensor{}, ddown, dweights)
                    .is_ok());
  expect_close(dweights, host_buffer::of<double>({1, 2}, {6 * gm1, 2 * g1}), {1e-14, 1e-14}, "dweights");
  expect_close(ddown, host_buffer::of<double>({3, 2, 1}, {1.5 * g1, 0, 0, 0, 0.5 * gm1, 0}), {1e-14, 1e-14}, "ddown");
}

BOOST_AUTO_TEST_CASE(experts_backward_matches_finite_differences_for_every_input) {
  const auto in = random_experts(n_tokens, n_experts, 70);
  const auto g = random_buffer(dtype::float64, {n_tokens, hidden}, 75);
  const auto loss = [&] { return weighted_sum(run_experts(in, dtype::float64), g); };
  host_buffer dy(dtype::float64, {n_tokens, hidden}), dgu(dtype::float64, {n_experts, 2 * inter, hidden}),
      ddown(dtype::float64, {n_experts, hidden, inter}), dw(dtype::float64, {n_tokens, top_k});
  BOOST_REQUIRE(
      ops::moe_experts_backward(ctx, in.y, in.gate_up, in.down, in.weights, in.indices, g, dy, dgu, ddown, dw).is_ok());
  check_gradient("dy", in.y, loss, dy);
  check_gradient("dgate_up", in.gate_up, loss, dgu);
  check_gradient("ddown", in.down, loss, ddown);
  check_gradient("dweights", in.weights, loss, dw);
}

BOOST_AUTO_TEST_CASE(experts_backward_in_float32_matches_float64_and_accumulates) {
  const auto in = random_experts(n_tokens, n_experts, 80);
  const auto g = random_buffer(dtype::float64, {n_tokens, hidden}, 85);
  std::vector<host_buffer> grads[2];
  for (const dtype type : {dtype::float64, dtype::float32}) {
    host_buffer dy(type, {n_tokens, hidden}), dgu(type, {n_experts, 2 * inter, hidden}),
        ddown(type, {n_experts, hidden, inter}), dw(type, {n_tokens, top_k});
    BOOST_REQUIRE(ops::moe_experts_backward(ctx, converted(in.y, type), converted(in.gate_up, type),
                                            converted(in.down, type), converted(in.weights, type), in.indices,
                                            converted(g, type), dy, dgu, ddown, dw)
                      .is_ok());
    grads[type == dtype::float32] = {dy, dgu, ddown, dw};
  }
  const char* names[] = {"dy", "dgate_up", "ddown", "dweights"};
  for (int i = 0; i < 4; ++i) expect_close(grads[1][i], grads[0][i], tolerance_for(dtype::float32), names[i]);
  // Second call: dgate_up and ddown add up, dy accumulates only on request, dweights is rewritten.
  const host_buffer dy = grads[0][0], dgu = grads[0][1], ddown = grads[0][2], dw = grads[0][3];  // shared storage
  const auto dy2 = doubled(dy), dgu2 = doubled(dgu), ddown2 = doubled(ddown), dw1 = converted(dw, dtype::float64);
  BOOST_REQUIRE(
      ops::moe_experts_backward(ctx, in.y, in.gate_up, in.down, in.weights, in.indices, g, dy, dgu, ddown, dw, true)
          .is_ok());
  expect_close(dy, dy2, tolerance_for(dtype::float64), "dy accumulated");
  expect_close(dgu, dgu2, tolerance_for(dtype::float64), "dgate_up twice");
  expect_close(ddown, ddown2, tolerance_for(dtype::float64), "ddown twice");
  expect_close(dw, dw1, tolerance_for(dtype::float64), "dweights written");
  BOOST_REQUIRE(
      ops::moe_experts_backward(ctx, in.y, in.gate_up, in.down, in.weights, in.indices, g, dy, tensor{}, tensor{}, tensor{})
          .is_ok());
  for (std::int64_t i = 0; i < dy.numel(); ++i) set_value(dy2, i, value_at(dy2, i) / 2);
  expect_close(dy, dy2, tolerance_for(dtype::float64), "dy written");
}

BOOST_AUTO_TEST_CASE(tokens_routed_to_the_same_expert_each_get_their_own_output_and_gradients_sum) {
  // Tokens 0, 1 and 2 all use expert 2 (in different slots); expert 1 has one token, expert 3 none.
  auto in = random_experts(3, n_experts, 90);
  in.indices = host_buffer::of<std::int32_t>({3, 2}, {2, 0, 1, 2, 2, 0});
  const auto g = random_buffer(dtype::float64, {3, hidden}, 95);
  const auto out = run_experts(in, dtype::float64);
  host_buffer dy(dtype::float64, {3, hidden}), dgu(dtype::float64, {n_experts, 2 * inter, hidden}),
      ddown(dtype::float64, {n_experts, hidden, inter}), dw(dtype::float64, {3, top_k});
  BOOST_REQUIRE(
      ops::moe_experts_backward(ctx, in.y, in.gate_up, in.down, in.weights, in.indices, g, dy, dgu, ddown, dw).is_ok());
  host_buffer dgu_sum(dtype::float64, {n_experts, 2 * inter, hidden}),
      ddown_sum(dtype::float64, {n_experts, hidden, inter});
  for (std::int64_t t = 0; t < 3; ++t) {
    const auto row = [&](const host_buffer& b) { return tensor(b).rows(t, t + 1); };
    host_buffer out1(dtype::float64, {1, hidden}), dy1(dtype::float64, {1, hidden}), dw1(dtype::float64, {1, top_k});
    BOOST_REQUIRE(
        ops::moe_experts_forward(ctx, row(in.y), in.gate_up, in.down, row(in.weights), row(in.indices), out1).is_ok());
    BOOST_REQUIRE(ops::moe_experts_backward(ctx, row(in.y), in.gate_up, in.down, row(in.weights), row(in.indices), row(g),
                                            dy1, dgu_sum, ddown_sum, dw1)
                      .is_ok());
    for (std::int64_t i = 0; i < hidden; ++i) {
      BOOST_TEST(value_at(out, t * hidden + i) == value_at(out1, i), boost::test_tools::tolerance(1e-12));
      BOOST_TEST(value_at(dy, t * hidden + i) == value_at(dy1, i), boost::test_tools::tolerance(1e-12));
    }
    for (std::int64_t s = 0; s < top_k; ++s)
      BOOST_TEST(value_at(dw, t * top_k + s) == value_at(dw1, s), boost::test_tools::tolerance(1e-12));
  }
  expect_close(dgu, dgu_sum, tolerance_for(dtype::float64), "dgate_up vs per-token sum");
  expect_close(ddown, ddown_sum, tolerance_for(dtype::float64), "ddown vs per-token sum");
  expect_close(out, loop_reference(in), tolerance_for(dtype::float64), "out vs loop");
}

BOOST_AUTO_TEST_CASE(a_token_listing_an_expert_twice_gets_both_weighted_terms) {
  auto in = random_experts(2, n_experts, 100);
  in.indices = host_buffer::of<std::int32_t>({2, 2}, {1, 1, 3, 0});
  expect_close(run_experts(in, dtype::float64), loop_reference(in), tolerance_for(dtype::float64), "out");
}

BOOST_AUTO_TEST_CASE(top_k_above_the_expert_count_is_refused) {
  const auto in = random_router(3, hidden, n_experts, 110);
  host_buffer w(dtype::float64, {3, 5}), idx(dtype::int32, {3, 5});
  const status s = ops::moe_router_forward(ctx, in.x, in.scale, in.proj, in.per_expert_scale, w, idx, tensor{}, tensor{});
  BOOST_TEST((s.code() == status_code::invalid_argument));
  BOOST_TEST(s.message() == "moe_router_forward: top_k K = 5 must lie in [1, E = 4]");
}

BOOST_AUTO_TEST_CASE(expert_indices_out_of_range_are_refused_naming_the_position) {
  auto in = random_experts(3, n_experts, 120);
  host_buffer out(dtype::float64, {3, hidden});
  in.indices.data<std::int32_t>()[3] = 4;
  status s = ops::moe_experts_forward(ctx, in.y, in.gate_up, in.down, in.weights, in.indices, out);
  BOOST_TEST((s.code() == status_code::invalid_argument));
  BOOST_TEST(s.message() == "moe_experts_forward: indices: value 4 at [1, 1] is out of range [0, 4)");
  in.indices.data<std::int32_t>()[3] = -1;
  s = ops::moe_experts_backward(ctx, in.y, in.gate_up, in.down, in.weights, in.indices, out, out, tensor{}, tensor{},
                                tensor{});
  BOOST_TEST(s.message() == "moe_experts_backward: indices: value -1 at [1, 1] is out of range [0, 4)");
  const auto r = random_router(3, hidden, n_experts, 125);
  host_buffer ren(dtype::float64, {3, 2}), inv(dtype::float64, {3});
  s = ops::moe_router_backward(ctx, r.x, r.scale, r.proj, r.per_expert_scale, in.indices, ren, inv, ren, tensor{}, tensor{},
                               tensor{}, tensor{});
  BOOST_TEST(s.message() == "moe_router_backward: indices: value -1 at [1, 1] is out of range [0, 4)");
}

BOOST_AUTO_TEST_CASE(wrong_dtypes_and_shapes_are_refused_naming_the_tensor) {
  const auto in = random_experts(3, n_experts, 130);
  host_buffer out(dtype::float64, {3, hidden});
  status s =
      ops::moe_experts_forward(ctx, in.y, in.gate_up, in.down, in.weights, converted(in.weights, dtype::float32), out);
  BOOST_TEST(s.message() == "moe_experts_forward: indices: expected dtype int32, got F32 [3, 2] cpu");
  host_buffer odd(dtype::float64, {n_experts, 11, hidden});
  s = ops::moe_experts_forward(ctx, in.y, odd, in.down, in.weights, in.indices, out);
  BOOST_TEST(s.message() == "moe_experts_forward: gate_up: expected an even row count 2 * Im, got F64 [4, 11, 8] cpu");
  s = ops::moe_experts_forward(ctx, in.y, in.gate_up, in.down, converted(in.weights, dtype::float32), in.indices, out);
  BOOST_TEST(s.message() == "moe_experts_forward: weights: expected dtype float64, got F32 [3, 2] cpu");
  const auto r = random_router(3, hidden, n_experts, 135);
  host_buffer w(dtype::float64, {3, 2}), idx(dtype::int32, {3, 2}), scale7(dtype::float64, {7});
  s = ops::moe_router_forward(ctx, r.x, scale7, r.proj, r.per_expert_scale, w, idx, tensor{}, tensor{});
  BOOST_TEST(s.message() == "moe_router_forward: router_scale: expected [8], got F64 [7] cpu");
}

BOOST_AUTO_TEST_CASE(float64_on_a_cuda_device_is_refused_naming_the_op) {
  const auto in = random_experts(3, n_experts, 140);
  host_buffer out(dtype::float64, {3, hidden});
  const auto on_cuda = [](const host_buffer& b) {
    return tensor::contiguous(b.data<void>(), b.type(), b.shape(), device::cuda(0));
  };
  const status s = ops::moe_experts_forward(cuda_ctx, on_cuda(in.y), on_cuda(in.gate_up), on_cuda(in.down), on_cuda(in.weights),
                                            on_cuda(in.indices), on_cuda(out));
  expect_cuda_refuses_float64(s, "moe_experts_forward");
}

BOOST_AUTO_TEST_SUITE_END()
