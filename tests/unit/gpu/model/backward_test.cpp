// The model's backward (gpu/model/backward.h) against central finite differences of the float64
// forward, on the tiny configs: every trainable tensor of every feature (PLE, KV sharing,
// double-wide MLP, k_eq_v, MoE, softcap, tied head), a few elements of each.
#include <boost/test/unit_test.hpp>

#include <cmath>

#include "gpu/model/backward.h"
#include "support/random_model.h"

#include "gpu/core/exec_context.h"

namespace {
// Every op of this file runs on the CPU, on the calling thread.
const tandem::gpu::exec_context ctx = tandem::gpu::exec_context::cpu();
}  // namespace

namespace tg = tandem::gpu;
using tandem::test::make_test_batch;
using tandem::test::random_model;
using tandem::test::test_batch;

namespace {

double loss(const random_model& m, const test_batch& b) {
  const std::int64_t T = b.tokens.numel();
  tg::host_buffer lp(tg::dtype::float64, {T});
  BOOST_REQUIRE(tg::forward_logprobs(ctx, m.config, m.w, b.view(), b.targets, {}, lp, 4).is_ok());
  double sum = 0;
  for (std::int64_t t = 0; t < T; ++t) sum += lp.data<double>()[t] * b.weights.data<double>()[t];
  return sum;
}

void check_config(const std::string& preset) {
  random_model m(tandem::test::preset_model_config(preset), tg::dtype::float64, 11);
  const test_batch b = make_test_batch(m.config.vocab_size, {9, 6}, tg::dtype::float64);
  const std::int64_t T = b.tokens.numel();
  tg::model_activations act;
  tg::host_buffer hidden(tg::dtype::float64, {T, m.config.hidden_size}), d_hidden(tg::dtype::float64, {T, m.config.hidden_size});
  BOOST_REQUIRE(tg::forward_for_backward(ctx, m.config, m.w, b.view(), hidden, act, tg::recompute_mode::none).is_ok());
  const tg::status head = tg::head_backward(ctx, m.config, m.w, hidden, b.targets, {}, b.weights, d_hidden, m.g, 5);
  BOOST_REQUIRE_MESSAGE(head.is_ok(), head.message());
  const tg::status back = tg::model_backward(ctx, m.config, m.w, b.view(), act, d_hidden, m.g);
  BOOST_REQUIRE_MESSAGE(back.is_ok(), back.message());

  std::mt19937 rng(3);
  int checked = 0;
  for (const auto& e : m.layout.tensors) {
    double* p = static_cast<double*>(tg::view_in(m.params, e, tg::dtype::float64)->data());
    const double* d = static_cast<const double*>(tg::view_in(m.grads, e, tg::dtype::float64)->data());
    double largest = 0;
    for (std::int64_t i = 0; i < e.elements(); ++i) largest = std::max(largest, std::abs(d[i]));
    for (int k = 0; k < 3; ++k) {
      const std::int64_t i = static_cast<std::int64_t>(rng() % static_cast<std::uint32_t>(e.elements()));
      const double h = 1e-5, saved = p[i];
      p[i] = saved + h;
      const double up = loss(m, b);
      p[i] = saved - h;
      const double down = loss(m, b);
      p[i] = saved;
      const double fd = (up - down) / (2 * h);
      BOOST_TEST(std::abs(fd - d[i]) <= 1e-6 + 1e-5 * std::max(std::abs(fd), largest),
                 preset << ": " << e.name << "[" << i << "]: analytic " << d[i] << ", finite differences " << fd);
      ++checked;
    }
  }
  BOOST_TEST(checked == 3 * static_cast<int>(m.layout.tensors.size()));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(model_backward)

BOOST_AUTO_TEST_CASE(every_gradient_of_the_all_features_model_matches_finite_differences) { check_config("tiny-all"); }

BOOST_AUTO_TEST_CASE(every_gradient_of_the_e2b_like_model_matches_finite_differences) { check_config("tiny-e"); }

BOOST_AUTO_TEST_CASE(every_gradient_of_the_dense_model_matches_finite_differences) { check_config("tiny-dense"); }

BOOST_AUTO_TEST_SUITE_END()
