// Recompute none | selective | full (gpu/model/activations.h): the loss and every gradient are
// bitwise equal across the three modes on the CPU, on the all-features, sliding-only and
// full-only configs, and on a layer whose keys get a rotary table but whose queries get none;
// that last case really differs from giving both tables, so the test checks something. The
// head's logits kept from the forward (what recompute none does in the engines) give the
// recomputed head's bits.
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <string>

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

namespace {

std::vector<std::byte> bytes_of(const tg::tensor& t) {
  const auto* p = static_cast<const std::byte*>(t.data());
  return {p, p + t.numel() * static_cast<std::int64_t>(tg::size_of(t.type()))};
}

}  // namespace

BOOST_AUTO_TEST_CASE(logits_kept_from_the_forward_give_the_recomputed_logprobs_and_head_gradients_bit_for_bit) {
  random_model m(with_layer_types("sliding_attention", 0), tg::dtype::float32, 17);  // softcap 3
  const test_batch b = make_test_batch(m.config.vocab_size, {11, 1, 7}, tg::dtype::float32);
  const std::int64_t T = b.tokens.numel(), H = m.config.hidden_size, V = m.config.vocab_size;
  tg::model_activations act;
  tg::host_buffer hidden(tg::dtype::float32, {T, H});
  BOOST_REQUIRE(tg::forward_for_backward(ctx, m.config, m.w, b.view(), hidden, act, tg::recompute_mode::none).is_ok());

  // The logprobs, 6 rows of logits at a time (4 chunks, the last short): recomputed and kept.
  tg::host_buffer lp(tg::dtype::float32, {T}), lp_kept(tg::dtype::float32, {T}), raw(tg::dtype::float32, {T, V});
  BOOST_REQUIRE(tg::head_logprobs(ctx, m.config, m.w, hidden, b.targets, {}, lp, 6).is_ok());
  BOOST_REQUIRE(tg::head_logprobs(ctx, m.config, m.w, hidden, b.targets, {}, lp_kept, 6, raw).is_ok());
  BOOST_TEST((bytes_of(lp_kept) == bytes_of(lp)), "kept logits changed the logprobs");

  // The head's backward: d_hidden and the head's gradient.
  const auto head = [&](const tg::tensor& kept) {
    std::memset(tg::view_in(m.grads, m.layout.tensors[0], tg::dtype::float32)->data(), 0, static_cast<std::size_t>(m.grads.bytes()));
    tg::host_buffer d_hidden(tg::dtype::float32, {T, H});
    const tg::status s = tg::head_backward(ctx, m.config, m.w, hidden, b.targets, {}, b.weights, d_hidden, m.g, 6, kept);
    BOOST_REQUIRE_MESSAGE(s.is_ok(), s.message());
    std::vector<std::byte> out = bytes_of(d_hidden), g = bytes_of(m.g.lm_head);
    out.insert(out.end(), g.begin(), g.end());
    return out;
  };
  const auto recomputed = head({});
  BOOST_TEST((head(raw) == recomputed), "kept logits changed the head's gradients");
  // The kept logits are what the backward reads: other logits give other gradients.
  for (float& x : raw.span<float>()) x *= 0.5f;
  BOOST_TEST((head(raw) != recomputed), "the kept logits were not read");
}

BOOST_AUTO_TEST_CASE(kept_logits_of_the_wrong_shape_are_refused_naming_them) {
  random_model m(with_layer_types("sliding_attention", 0), tg::dtype::float32, 17);
  const test_batch b = make_test_batch(m.config.vocab_size, {5}, tg::dtype::float32);
  const std::int64_t T = b.tokens.numel(), H = m.config.hidden_size, V = m.config.vocab_size;
  tg::host_buffer hidden(tg::dtype::float32, {T, H}), d_hidden(tg::dtype::float32, {T, H}), lp(tg::dtype::float32, {T});
  tg::host_buffer short_raw(tg::dtype::float32, {T - 1, V});
  const tg::status f = tg::head_logprobs(ctx, m.config, m.w, hidden, b.targets, {}, lp, 4, short_raw);
  BOOST_TEST(!f.is_ok());
  BOOST_TEST(f.message().find("raw_logits") != std::string::npos, f.message());
  const tg::status g = tg::head_backward(ctx, m.config, m.w, hidden, b.targets, {}, b.weights, d_hidden, m.g, 4, short_raw);
  BOOST_TEST(!g.is_ok());
  BOOST_TEST(g.message().find("raw_logits") != std::string::npos, g.message());
}

BOOST_AUTO_TEST_SUITE_END()
