// The model FLOPs of gpu/model/model_flops.h against a count written out by hand from the config:
// the projections of each layer by their shapes, the tied head, and attention's keys summed query
// by query, on a small config with MoE and k = v layers, and on E2B's shape (KV-shared layers,
// double-wide MLPs, per-layer inputs).
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <filesystem>

#include "gpu/model/config.h"
#include "gpu/model/layout.h"
#include "gpu/model/model_flops.h"

namespace tg = tandem::gpu;

namespace {

// 2 FLOPs per weight per token of every projection, written from the config alone.
double matrix_flops_per_token(const tg::model_config& c) {
  const double H = static_cast<double>(c.hidden_size), nh = static_cast<double>(c.num_attention_heads);
  double w = static_cast<double>(c.vocab_size) * H;  // the tied head
  for (const auto& L : c.layers) {
    const double d = static_cast<double>(L.head_dim), g = static_cast<double>(L.num_key_value_heads);
    w += 2 * H * nh * d;                                       // q_proj and o_proj
    if (!L.is_kv_shared) w += H * g * d * (L.k_eq_v ? 1 : 2);  // k_proj, v_proj
    w += 3 * H * static_cast<double>(L.intermediate_size);     // gate, up, down
    if (c.hidden_size_per_layer_input > 0) w += 2 * H * static_cast<double>(c.hidden_size_per_layer_input);  // PLE gate, projection
    if (c.enable_moe_block)  // the router, and top_k experts' gate, up and down of width moe_intermediate_size
      w += static_cast<double>(c.num_experts) * H + static_cast<double>(c.top_k_experts) * 3 * H * static_cast<double>(c.moe_intermediate_size);
  }
  if (c.hidden_size_per_layer_input > 0)  // the per-layer model projection
    w += H * static_cast<double>(c.num_hidden_layers) * static_cast<double>(c.hidden_size_per_layer_input);
  return 2 * w;
}

// Σ over queries of the keys each attends to, times 4 · heads · head_dim, layer by layer.
double attention_flops(const tg::model_config& c, std::int64_t length) {
  double f = 0;
  for (const auto& L : c.layers)
    for (std::int64_t p = 0; p < length; ++p) {
      const std::int64_t keys = L.type == tg::layer_type::sliding ? std::min<std::int64_t>(p + 1, c.sliding_window) : p + 1;
      f += 4.0 * static_cast<double>(keys) * static_cast<double>(c.num_attention_heads * L.head_dim);
    }
  return f;
}

void check(const tg::model_config& c, std::int64_t sequences, std::int64_t length) {
  const auto layout = tg::build_layout(c, tg::dtype::float32);
  const double want = static_cast<double>(sequences) * (matrix_flops_per_token(c) * static_cast<double>(length) + attention_flops(c, length));
  BOOST_TEST(tg::forward_flops(c, layout, sequences, length) == want, boost::test_tools::tolerance(1e-12));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(model_flops)

BOOST_AUTO_TEST_CASE(a_small_config_counts_each_projection_top_k_experts_the_head_and_every_query_keys) {
  const auto c = tg::load_model_config(std::filesystem::path(TANDEM_SOURCE_DIR) / "configs/models/tiny-dense");
  BOOST_REQUIRE(c.has_value());
  for (const std::int64_t length : {std::int64_t{1}, std::int64_t{7}, c->sliding_window, c->sliding_window + 13}) check(*c, 3, length);
}

BOOST_AUTO_TEST_CASE(e2b_counts_shared_layers_without_kv_and_the_per_layer_inputs) {
  const auto c = tg::load_model_config(std::filesystem::path(TANDEM_SOURCE_DIR) / "configs/models/gemma-4-E2B");
  BOOST_REQUIRE(c.has_value());
  BOOST_REQUIRE(c->enable_moe_block == false);
  check(*c, 1, 4096);
}

BOOST_AUTO_TEST_SUITE_END()
