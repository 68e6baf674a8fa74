// Recompute none | selective | full (gpu/model/activations.h): the loss and every gradient are
// bitwise equal across the three modes on the CPU, on the all-features, sliding-only and
// full-only configs, and on a layer whose keys get a rotary table but whose queries get none;
// that last case really differs from giving both tables, so the test checks something.
#include <boost/test/unit_test.hpp>

#include <cstring>

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

// The gradient slab's bytes after one backward of Σ weights · logprobs in `mode`.
std::vector<std::byte> gradients(const tg::model_config& config, tg::recompute_mode mode, const tg::layer_args_hook& hook = {}) {
  random_model m(config, tg::dtype::float32, 17);
  const test_batch b = make_test_batch(m.config.vocab_size, {11, 1, 7}, tg::dtype::float32);
  const std::int64_t T = b.tokens.numel();
  tg::model_activations act;
  tg::host_buffer hidden(tg::dtype::float32, {T, m.config.hidden_size}), d_hidden(tg::dtype::float32, {T, m.config.hidden_size});
  BOOST_REQUIRE(tg::forward_for_backward(ctx, m.config, m.w, b.view(), hidden, act, mode, {}, hook).is_ok());
  BOOST_REQUIRE(tg::head_backward(ctx, m.config, m.w, hidden, b.targets, {}, b.weights, d_hidden, m.g, 6).is_ok());
  const tg::status s = tg::model_backward(ctx, m.config, m.w, b.view(), act, d_hidden, m.g);
  BOOST_REQUIRE_MESSAGE(s.is_ok(), s.message());
  const auto* p = static_cast<const std::byte*>(tg::view_in(m.grads, m.layout.tensors[0], tg::dtype::float32)->data());
  return {p, p + m.grads.bytes()};
}

void check_modes(const tg::model_config& config, const tg::layer_args_hook& hook = {}) {
  const auto none = gradients(config, tg::recompute_mode::none, hook);
  BOOST_TEST((gradients(config, tg::recompute_mode::selective, hook) == none), "selective differs from none");
  BOOST_TEST((gradients(config, tg::recompute_mode::full, hook) == none), "full differs from none");
}

// Four layers of one type (the parser forces the last layer to full, as transformers does) with
// `shared` KV-shared layers.
tg::model_config with_layer_types(const std::string& type, int shared) {
  std::string text = R"({"model_type": "gemma4_text", "vocab_size": 256, "hidden_size": 64, "intermediate_size": 96,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "global_head_dim": 32, "num_hidden_layers": 4,
    "hidden_size_per_layer_input": 8, "vocab_size_per_layer_input": 256, "num_kv_shared_layers": )" + std::to_string(shared) + R"(, "sliding_window": 3,
    "final_logit_softcapping": 3.0, "layer_types": [")" + type + R"(", ")" + type + R"(", ")" + type + R"(", ")" + type + R"("]})";
  auto parsed = tg::parse_model_config(text, "inline.json");
  BOOST_REQUIRE_MESSAGE(parsed.has_value(), (parsed.has_value() ? "" : parsed.error().message()));
  return *parsed;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(recompute)

BOOST_AUTO_TEST_CASE(the_all_features_model_gives_bitwise_equal_gradients_in_every_mode) {
  check_modes(tandem::test::preset_model_config("tiny-all"));
}

BOOST_AUTO_TEST_CASE(a_sliding_only_model_gives_bitwise_equal_gradients_in_every_mode) {
  const tg::model_config c = with_layer_types("sliding_attention", 0);
  for (int l = 0; l < 3; ++l) BOOST_TEST((c.layers[static_cast<std::size_t>(l)].type == tg::layer_type::sliding));
  check_modes(c);
}

BOOST_AUTO_TEST_CASE(a_full_only_model_gives_bitwise_equal_gradients_in_every_mode) {
  const tg::model_config c = with_layer_types("full_attention", 2);
  for (const auto& layer : c.layers) BOOST_TEST((layer.type == tg::layer_type::full));
  BOOST_TEST(c.layers[3].is_kv_shared);
  check_modes(c);
}

BOOST_AUTO_TEST_CASE(a_layer_with_a_key_table_but_no_query_table_keeps_it_so_through_recompute) {
  const tg::model_config c = tandem::test::preset_model_config("tiny-all");
  const tg::layer_args_hook no_query_rope = [](int layer, tg::layer_args& args) {
    if (layer == 1) args.q_rope = nullptr;  // layer 1 stores K/V that the shared layers 3 and 4 read
  };
  check_modes(c, no_query_rope);
  BOOST_TEST((gradients(c, tg::recompute_mode::full, no_query_rope) != gradients(c, tg::recompute_mode::full)),
             "dropping the query table changed nothing: the case checks nothing");
}

BOOST_AUTO_TEST_SUITE_END()
