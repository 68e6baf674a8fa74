// The model's backward (gpu/model/backward.h) against central finite differences of the float64
// forward, on the tiny configs: every trainable tensor of every feature (PLE, KV sharing,
// double-wide MLP, k_eq_v, MoE, softcap, tied head), a few elements of each.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <random>

#include "gpu/core/host_buffer.h"
#include "gpu/core/slab.h"
#include "gpu/model/backward.h"
#include "gpu/model/forward.h"
#include "gpu/model/layout.h"
#include "gpu/model/slab_views.h"

namespace tg = tandem::gpu;

namespace {

struct batch_data {
  tg::host_buffer tokens, positions, cu, targets, weights;
  tg::packed_batch view() const { return {tokens, positions, cu}; }
};

// Two sequences of 9 and 6 tokens (ids 1..V-1: the padding row 0 gets no lookup gradient), each
// next token weighted by a random factor.
batch_data make_batch(std::int64_t vocab) {
  std::mt19937 rng(5);
  std::vector<std::int32_t> tok, pos, tgt, cu{0};
  std::vector<double> wts;
  for (int n : {9, 6}) {
    std::vector<std::int32_t> s(static_cast<std::size_t>(n));
    for (auto& t : s) t = static_cast<std::int32_t>(1 + rng() % static_cast<std::uint32_t>(vocab - 1));
    for (int t = 0; t < n; ++t) {
      tok.push_back(s[static_cast<std::size_t>(t)]);
      pos.push_back(t);
      tgt.push_back(t + 1 < n ? s[static_cast<std::size_t>(t) + 1] : 0);
      wts.push_back(t + 1 < n ? std::uniform_real_distribution<double>(-1, 1)(rng) : 0.0);
    }
    cu.push_back(static_cast<std::int32_t>(tok.size()));
  }
  const auto T = static_cast<std::int64_t>(tok.size());
  return {tg::host_buffer::of<std::int32_t>({T}, tok), tg::host_buffer::of<std::int32_t>({T}, pos),
          tg::host_buffer::of<std::int32_t>({static_cast<std::int64_t>(cu.size())}, cu),
          tg::host_buffer::of<std::int32_t>({T}, tgt), tg::host_buffer::of<double>({T}, wts)};
}

double loss(const tg::model_config& c, const tg::model_weights& w, const batch_data& b) {
  const std::int64_t T = b.tokens.numel();
  tg::host_buffer lp(tg::dtype::float64, {T});
  BOOST_REQUIRE(tg::forward_logprobs(c, w, b.view(), b.targets, {}, lp, 4).is_ok());
  double sum = 0;
  for (std::int64_t t = 0; t < T; ++t) sum += lp.data<double>()[t] * b.weights.data<double>()[t];
  return sum;
}

void check_config(const std::string& preset) {
  auto config = tg::load_model_config(std::filesystem::path(TANDEM_SOURCE_DIR) / "configs/models" / preset);
  BOOST_REQUIRE(config.has_value());
  const tg::model_config& c = *config;
  const tg::model_layout layout = tg::build_layout(c, tg::dtype::float64);
  auto params = tg::slab::create("parameters", layout.total_bytes(), tg::device::cpu());
  auto grads = tg::slab::create("gradients", layout.total_bytes(), tg::device::cpu());
  BOOST_REQUIRE(params.has_value() && grads.has_value());
  std::mt19937 rng(11);
  for (const auto& e : layout.tensors) {  // norms and scalars near 1, matrices small
    double* p = static_cast<double*>(tg::view_in(*params, e, tg::dtype::float64)->data());
    for (std::int64_t i = 0; i < e.elements(); ++i)
      p[i] = e.shape.size() == 1 ? std::uniform_real_distribution<double>(0.5, 1.5)(rng)
                                 : std::normal_distribution<double>(0, 0.25)(rng);
  }
  const auto w = *tg::bind_weights(c, layout, *params);
  const auto g = *tg::bind_weights(c, layout, *grads);
  const batch_data b = make_batch(c.vocab_size);
  const std::int64_t T = b.tokens.numel();

  tg::model_activations act;
  tg::host_buffer hidden(tg::dtype::float64, {T, c.hidden_size}), d_hidden(tg::dtype::float64, {T, c.hidden_size});
  BOOST_REQUIRE(tg::forward_hidden(c, w, b.view(), hidden, {}, &act).is_ok());
  const tg::status head = tg::head_backward(c, w, hidden, b.targets, {}, b.weights, d_hidden, g, 5);
  BOOST_REQUIRE_MESSAGE(head.is_ok(), head.message());
  const tg::status back = tg::model_backward(c, w, b.view(), act, d_hidden, g);
  BOOST_REQUIRE_MESSAGE(back.is_ok(), back.message());

  int checked = 0;
  for (const auto& e : layout.tensors) {
    double* p = static_cast<double*>(tg::view_in(*params, e, tg::dtype::float64)->data());
    const double* d = static_cast<const double*>(tg::view_in(*grads, e, tg::dtype::float64)->data());
    double largest = 0;
    for (std::int64_t i = 0; i < e.elements(); ++i) largest = std::max(largest, std::abs(d[i]));
    for (int k = 0; k < 3; ++k) {
      const std::int64_t i = static_cast<std::int64_t>(rng() % static_cast<std::uint32_t>(e.elements()));
      const double h = 1e-5, saved = p[i];
      p[i] = saved + h;
      const double up = loss(c, w, b);
      p[i] = saved - h;
      const double down = loss(c, w, b);
      p[i] = saved;
      const double fd = (up - down) / (2 * h);
      BOOST_TEST(std::abs(fd - d[i]) <= 1e-6 + 1e-5 * std::max(std::abs(fd), largest),
                 preset << ": " << e.name << "[" << i << "]: analytic " << d[i] << ", finite differences " << fd);
      ++checked;
    }
  }
  BOOST_TEST(checked == 3 * static_cast<int>(layout.tensors.size()));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(model_backward)

BOOST_AUTO_TEST_CASE(every_gradient_of_the_all_features_model_matches_finite_differences) { check_config("tiny-all"); }

BOOST_AUTO_TEST_CASE(every_gradient_of_the_e2b_like_model_matches_finite_differences) { check_config("tiny-e"); }

BOOST_AUTO_TEST_CASE(every_gradient_of_the_dense_model_matches_finite_differences) { check_config("tiny-dense"); }

BOOST_AUTO_TEST_SUITE_END()
