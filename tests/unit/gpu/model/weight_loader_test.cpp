// Text-only loads of checkpoints into a parameter slab (gpu/model/checkpoint.h, weight_plan.h,
// weight_loader.h): every tensor at its layout offset, dtype conversion, the wrappers' non-text
// tensors skipped by exact prefix and reported in one line, the unused K/V of KV-shared layers
// ignored, a tied head checked, and one located error for every kind of bad checkpoint.
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <string>

#include "gpu/core/half.h"
#include "gpu/model/checkpoint.h"
#include "gpu/model/slab_views.h"
#include "support/checkpoint_fixture.h"
#include "support/temp_dir.h"

namespace tg = tandem::gpu;
using tandem::test::checkpoint_builder;
using tandem::test::preset_config;
using tandem::test::temp_dir;
using tandem::test::wrapper;

namespace {

tg::model_config config_of(const std::string& text) {
  auto c = tg::parse_model_config(text, "config.json");
  BOOST_REQUIRE_MESSAGE(c.has_value(), (c.has_value() ? "" : c.error().message()));
  return *c;
}

// A checkpoint of `preset` (wrapped as asked) with every text tensor in `type`.
checkpoint_builder text_checkpoint(const temp_dir& t, const std::string& preset, tg::dtype type,
                                   wrapper w = wrapper::text_only) {
  checkpoint_builder b(t.path() / "ckpt");
  const std::string config = preset_config(preset, w);
  b.set_config(config);
  b.add_text_stack(config_of(config), type);
  return b;
}

tg::checkpoint open_ok(const std::filesystem::path& dir, tg::dtype type = tg::dtype::float32) {
  auto c = tg::open_checkpoint(dir, type);
  BOOST_REQUIRE_MESSAGE(c.has_value(), (c.has_value() ? "" : c.error().message()));
  return std::move(*c);
}

std::string open_error(const std::filesystem::path& dir) {
  auto c = tg::open_checkpoint(dir, tg::dtype::float32);
  BOOST_REQUIRE_MESSAGE(!c.has_value(), "the checkpoint was accepted");
  return c.error().message();
}

tg::slab load_ok(const tg::checkpoint& c) {
  auto s = tg::load_checkpoint(c, tg::device::cpu());
  BOOST_REQUIRE_MESSAGE(s.has_value(), (s.has_value() ? "" : s.error().message()));
  return std::move(*s);
}

// The slab bytes of layout tensor `name` (without the text prefix).
const std::byte* in_slab(const tg::slab& s, const tg::checkpoint& c, const std::string& name) {
  const tg::tensor_entry* e = c.layout.find(name);
  BOOST_REQUIRE_MESSAGE(e, name);
  return static_cast<const std::byte*>(tg::view_in(s, *e, e->type)->data());
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

BOOST_AUTO_TEST_SUITE(weight_loader)

BOOST_AUTO_TEST_CASE(a_text_only_checkpoint_loads_every_tensor_at_its_layout_offset) {
  temp_dir t;
  checkpoint_builder b = text_checkpoint(t, "tiny-all", tg::dtype::float32);
  b.write();
  const tg::checkpoint c = open_ok(b.dir());
  BOOST_TEST(c.report.text_tensors == static_cast<std::int64_t>(c.layout.tensors.size()));
  BOOST_TEST(c.report.skipped.empty());
  BOOST_TEST(c.report.skipped_line().empty());
  const tg::slab s = load_ok(c);
  for (const tg::tensor_entry& e : c.layout.tensors) {
    const auto& file = b.tensors().at("model." + e.name);
    BOOST_TEST(std::memcmp(in_slab(s, c, e.name), file.data.data(), file.data.size()) == 0, e.name);
  }
}

BOOST_AUTO_TEST_CASE(bfloat16_and_float16_files_widen_exactly_into_a_float32_slab) {
  for (tg::dtype type : {tg::dtype::bfloat16, tg::dtype::float16}) {
    temp_dir t;
    checkpoint_builder b = text_checkpoint(t, "tiny-dense", type);
    b.write();
    const tg::checkpoint c = open_ok(b.dir());
    const tg::slab s = load_ok(c);
    for (const tg::tensor_entry& e : c.layout.tensors) {
      const auto& file = b.tensors().at("model." + e.name);
      const float* got = reinterpret_cast<const float*>(in_slab(s, c, e.name));
      for (std::int64_t i = 0; i < e.elements(); ++i) {
        std::uint16_t bits;
        std::memcpy(&bits, file.data.data() + 2 * i, 2);
        const float want = type == tg::dtype::bfloat16 ? tg::to_float(tg::bfloat16{bits}) : tg::to_float(tg::float16{bits});
        if (std::memcmp(&got[i], &want, 4) != 0) BOOST_FAIL(e.name << " element " << i);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(float32_files_round_to_nearest_even_into_a_bfloat16_slab) {
  temp_dir t;
  checkpoint_builder b = text_checkpoint(t, "tiny-dense", tg::dtype::float32);
  // Ties between neighbouring bfloat16 values round to the even one; the rest to the nearest.
  const std::vector<float> values{1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -(1.0f + 0x1p-8f), 1.0f + 0x1p-8f + 0x1p-20f,
                                  3.0e38f, -0.0f, 1e-40f, 0x1p-134f};
  auto& norm = b.tensors().at("model.norm.weight");
  std::memcpy(norm.data.data(), values.data(), values.size() * 4);
  b.write();
  const tg::checkpoint c = open_ok(b.dir(), tg::dtype::bfloat16);
  const tg::slab s = load_ok(c);
  const std::uint16_t* got = reinterpret_cast<const std::uint16_t*>(in_slab(s, c, "norm.weight"));
  const std::vector<std::uint16_t> want{0x3f80, 0x3f82, 0xbf80, 0x3f81, 0x7f62, 0x8000, 0x0001, 0x0000};
  for (std::size_t i = 0; i < want.size(); ++i) BOOST_TEST(got[i] == want[i], "element " << i);
}

BOOST_AUTO_TEST_CASE(a_multimodal_checkpoint_skips_exactly_its_non_text_tensors_and_says_so_in_one_line) {
  temp_dir t;
  checkpoint_builder b = text_checkpoint(t, "tiny-all", tg::dtype::bfloat16, wrapper::multimodal);
  b.add_random("model.vision_tower.encoder.layers.0.self_attn.q_proj.linear.weight", tg::dtype::bfloat16, {8, 8}, 7);
  b.add_random("model.vision_tower.patch_embedder.input_proj.weight", tg::dtype::bfloat16, {8, 12}, 8);
  b.add("model.vision_tower.encoder.layers.0.self_attn.q_proj.input_min", tg::st_dtype::f32, {}, std::vector<std::byte>(4));
  b.add_random("model.embed_vision.embedding_projection.weight", tg::dtype::bfloat16, {64, 8}, 9);
  b.add_random("model.audio_tower.layers.0.feed_forward.w.weight", tg::dtype::float32, {4, 4}, 10);
  b.add_random("model.embed_audio.embedding_projection.weight", tg::dtype::bfloat16, {64, 6}, 11);
  b.write(20000);
  const tg::checkpoint c = open_ok(b.dir());
  BOOST_TEST(c.files->sharded());
  BOOST_TEST(c.report.text_tensors == static_cast<std::int64_t>(c.layout.tensors.size()));
  BOOST_TEST(c.report.skipped_tensors() == 6);
  BOOST_TEST(c.report.skipped_line() ==
             "skipped 6 non-text tensors (2.18 kB): model.vision_tower. 3 (324 B), model.audio_tower. 1 (64 B), "
             "model.embed_vision. 1 (1.02 kB), model.embed_audio. 1 (768 B)");
  const tg::slab s = load_ok(c);
  const auto& q = b.tensors().at("model.language_model.layers.2.self_attn.q_proj.weight");
  const float* got = reinterpret_cast<const float*>(in_slab(s, c, "layers.2.self_attn.q_proj.weight"));
  std::uint16_t bits;
  std::memcpy(&bits, q.data.data(), 2);
  BOOST_TEST(got[0] == tg::to_float(tg::bfloat16{bits}));
}

BOOST_AUTO_TEST_CASE(a_unified_checkpoint_skips_its_encoder_free_embedders) {
  temp_dir t;
  checkpoint_builder b = text_checkpoint(t, "tiny-all", tg::dtype::bfloat16, wrapper::unified);
  b.add_random("model.embed_vision.patch_embedder.dense.weight", tg::dtype::bfloat16, {8, 8}, 3);
  b.add_random("model.embed_audio.embedding_projection.weight", tg::dtype::bfloat16, {64, 4}, 4);
  b.write();
  const tg::checkpoint c = open_ok(b.dir());
  BOOST_TEST(c.config.hidden_size_per_layer_input == 0);
  BOOST_TEST(c.report.skipped_line() == "skipped 2 non-text tensors (640 B): model.embed_vision. 1 (128 B), model.embed_audio. 1 (512 B)");
  load_ok(c);
}

BOOST_AUTO_TEST_CASE(look_alike_names_are_neither_text_nor_skipped_but_refused) {
  for (const std::string name : {"model.language_model_extra.x", "model.vision_tower_x.weight", "model.embed_visionary.w",
                                 "vision_tower.encoder.weight", "lm_head.weight.extra", "model.lm_head.weight"}) {
    temp_dir t;
    checkpoint_builder b = text_checkpoint(t, "tiny-dense", tg::dtype::bfloat16, wrapper::multimodal);
    b.add_random(name, tg::dtype::bfloat16, {2}, 1);
    b.write();
    const std::string e = open_error(b.dir());
    BOOST_TEST(contains(e, (b.dir() / "model.safetensors").string() + ": tensor '" + name + "'"), e);
    BOOST_TEST(contains(e, "not part of a gemma4 checkpoint"), e);
  }
}

BOOST_AUTO_TEST_CASE(a_text_only_checkpoint_does_not_skip_multimodal_prefixes) {
  temp_dir t;
  checkpoint_builder b = text_checkpoint(t, "tiny-dense", tg::dtype::bfloat16);
  b.add_random("model.vision_tower.x.weight", tg::dtype::bfloat16, {2}, 1);
  b.write();
  const std::string e = open_error(b.dir());
  BOOST_TEST(contains(e, "tensor 'model.vision_tower.x.weight': inside the text stack, but the model's config has no such tensor"), e);
}

BOOST_AUTO_TEST_CASE(the_unused_k_v_weights_of_kv_shared_layers_are_ignored_and_nothing_else_is) {
  temp_dir t;
  checkpoint_builder b = text_checkpoint(t, "tiny-all", tg::dtype::bfloat16);  // layers 3-5 KV-shared
  for (int l : {3, 4, 5}) {
    const std::string p = "model.layers." + std::to_string(l) + ".self_attn.";
    b.add_random(p + "k_proj.weight", tg::dtype::bfloat16, {32, 64}, 20 + l);
    b.add_random(p + "v_proj.weight", tg::dtype::bfloat16, {32, 64}, 30 + l);
    b.add_random(p + "k_norm.weight", tg::dtype::bfloat16, {16}, 40 + l);
  }
  b.write();
  const tg::checkpoint c = open_ok(b.dir());
  BOOST_TEST(c.report.unused_kv_tensors == 9);
  load_ok(c);

  for (const std::string extra : {"model.layers.2.self_attn.v_proj.weight",   // k_eq_v full layer: no v_proj
                                  "model.layers.3.self_attn.q_norm.bias",      // not one of the three
                                  "model.layers.03.self_attn.k_proj.weight",   // not a layer name
                                  "model.layers.6.self_attn.k_proj.weight"}) { // no such layer
    temp_dir u;
    checkpoint_builder d = text_checkpoint(u, "tiny-all", tg::dtype::bfloat16);
    d.add_random(extra, tg::dtype::bfloat16, {2}, 1);
    d.write();
    const std::string e = open_error(d.dir());
    BOOST_TEST(contains(e, "tensor '" + extra + "': inside the text stack, but the model's config has no such tensor"), e);
  }
}

BOOST_AUTO_TEST_CASE(a_missing_tensor_is_named_with_the_file_that_should_hold_it) {
  temp_dir t;
  checkpoint_builder b = text_checkpoint(t, "tiny-all", tg::dtype::bfloat16);
  b.remove("model.layers.4.mlp.up_proj.weight");
  b.remove("model.norm.weight");
  b.write(30000);
  const std::string e = open_error(b.dir());
  BOOST_TEST(e == (b.dir() / "model.safetensors.index.json").string() +
                      ": missing tensor 'model.norm.weight' (and 1 more of the text stack)");
}

BOOST_AUTO_TEST_CASE(a_mis_shaped_or_mis_typed_tensor_is_named_with_its_file) {
  {
    temp_dir t;
    checkpoint_builder b = text_checkpoint(t, "tiny-all", tg::dtype::bfloat16);
    b.add_random("model.layers.2.self_attn.q_proj.weight", tg::dtype::bfloat16, {64, 64}, 3);
    b.write();
    BOOST_TEST(open_error(b.dir()) == (b.dir() / "model.safetensors").string() +
                                          ": tensor 'model.layers.2.self_attn.q_proj.weight': shape [64, 64], expected "
                                          "[128, 64] for this config");
  }
  {
    temp_dir t;
    checkpoint_builder b = text_checkpoint(t, "tiny-all", tg::dtype::bfloat16);
    b.add("model.layers.0.layer_scalar", tg::st_dtype::i32, {1}, std::vector<std::byte>(4));
    b.write();
    BOOST_TEST(open_error(b.dir()) == (b.dir() / "model.safetensors").string() +
                                          ": tensor 'model.layers.0.layer_scalar': dtype I32, expected F32, BF16 or F16");
  }
}

BOOST_AUTO_TEST_CASE(a_tied_lm_head_may_be_absent_or_must_equal_the_embedding) {
  temp_dir t;
  checkpoint_builder b = text_checkpoint(t, "tiny-dense", tg::dtype::bfloat16);
  const auto embed = b.tensors().at("model.embed_tokens.weight");
  // Equal values in another dtype are equal.
  std::vector<std::byte> widened(embed.data.size() * 2);
  tg::convert_elements(embed.data.data(), tg::dtype::bfloat16, widened.data(), tg::dtype::float32,
                       static_cast<std::int64_t>(embed.data.size() / 2));
  b.add("lm_head.weight", tg::st_dtype::f32, embed.shape, widened);
  b.write();
  const tg::checkpoint c = open_ok(b.dir());
  BOOST_TEST(c.report.tied_head_present);
  load_ok(c);

  temp_dir u;
  checkpoint_builder d = text_checkpoint(u, "tiny-dense", tg::dtype::bfloat16);
  auto head = d.tensors().at("model.embed_tokens.weight");
  head.data[2 * 37] ^= std::byte{1};
  d.add("lm_head.weight", head.type, head.shape, head.data);
  d.write();
  auto bad = tg::load_checkpoint(open_ok(d.dir()), tg::device::cpu());
  BOOST_REQUIRE(!bad.has_value());
  BOOST_TEST(contains(bad.error().message(), "model.safetensors: tensor 'lm_head.weight': the config ties it to "
                                             "'model.embed_tokens.weight', but element 37 differs"),
             bad.error().message());
}

BOOST_AUTO_TEST_CASE(flat_and_per_layer_config_forms_load_the_same_checkpoint) {
  temp_dir t;
  checkpoint_builder b = text_checkpoint(t, "tiny-all", tg::dtype::float32);
  b.write();
  const tg::checkpoint flat = open_ok(b.dir());
  std::filesystem::copy_file(std::filesystem::path(TANDEM_SOURCE_DIR) / "tests/data/models/tiny-all-per-layer/config.json",
                             b.dir() / "config.json", std::filesystem::copy_options::overwrite_existing);
  const tg::checkpoint per_layer = open_ok(b.dir());
  BOOST_TEST(per_layer.layout.total_elements == flat.layout.total_elements);
  BOOST_TEST(per_layer.config.layers == flat.config.layers);
  const tg::slab a = load_ok(flat), c = load_ok(per_layer);
  BOOST_TEST(std::memcmp(tg::view_in(a, flat.layout.tensors[0], tg::dtype::float32)->data(),
                         tg::view_in(c, per_layer.layout.tensors[0], tg::dtype::float32)->data(), a.bytes()) == 0);
}

BOOST_AUTO_TEST_CASE(a_bad_config_is_named_with_its_file_and_key) {
  temp_dir t;
  checkpoint_builder b = text_checkpoint(t, "tiny-dense", tg::dtype::float32);
  b.write();
  b.set_config(R"({"model_type": "gemma5_text"})");
  BOOST_TEST(contains(open_error(b.dir()), (b.dir() / "config.json").string() + ": model_type: unsupported model type"));
  b.set_config(R"({"model_type": "gemma4_text", "num_attention_heads": 4, "num_key_value_heads": 3})");
  BOOST_TEST(contains(open_error(b.dir()), "num_key_value_heads"));
  b.set_config(R"({"model_type": "gemma4_text", "hidden_size": 8, "hidden_size": 16})");
  BOOST_TEST(open_error(b.dir()) == (b.dir() / "config.json").string() + ": duplicate key 'hidden_size'");
  b.set_config(R"({"model_type": "gemma4_text", "architectures": ["Gemma4ForSequenceClassification"]})");
  BOOST_TEST(contains(open_error(b.dir()), "architectures: unsupported architecture"));
}

BOOST_AUTO_TEST_SUITE_END()
