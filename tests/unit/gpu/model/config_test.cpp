// Tests of config.json parsing (gpu/model/config.h): the published and tiny configs, the
// __post_init__ derivations, flat vs per_layer_config forms, KV sharing, and error messages that
// name the file and the key.
#include "gpu/model/config.h"

#include <boost/test/unit_test.hpp>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tg = tandem::gpu;

namespace {

std::filesystem::path source_path(const std::string& relative) {
  return std::filesystem::path(TANDEM_SOURCE_DIR) / relative;
}

tg::model_config load_model(const std::string& name) {
  auto r = tg::load_model_config(source_path("configs/models/" + name));
  BOOST_REQUIRE_MESSAGE(r.has_value(), (r.has_value() ? "" : r.error().message()));
  return *r;
}

tg::model_config parse_ok(const std::string& text) {
  auto r = tg::parse_model_config(text, "inline.json");
  BOOST_REQUIRE_MESSAGE(r.has_value(), (r.has_value() ? "" : r.error().message()));
  return *r;
}

tg::status parse_error(const std::string& text, const std::string& source = "inline.json") {
  auto r = tg::parse_model_config(text, source);
  BOOST_REQUIRE_MESSAGE(!r.has_value(), "expected a parse error");
  return r.error();
}

// Indices of the layers of the given type.
std::vector<int> layers_of(const tg::model_config& c, tg::layer_type type) {
  std::vector<int> out;
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    if (c.layers[static_cast<std::size_t>(l)].type == type) out.push_back(l);
  }
  return out;
}

const tg::layer_config& layer(const tg::model_config& c, int l) {
  return c.layers.at(static_cast<std::size_t>(l));
}

// A small text-only config; `extra` is spliced in as more top-level keys.
std::string small_text_config(const std::string& extra) {
  return R"({"model_type": "gemma4_text", "vocab_size": 32, "hidden_size": 16,
             "intermediate_size": 24, "num_attention_heads": 4, "num_key_value_heads": 2,
             "head_dim": 8, "global_head_dim": 16, "hidden_size_per_layer_input": 0)" +
         (extra.empty() ? "" : ", " + extra) + "}";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gpu_model_config)

BOOST_AUTO_TEST_CASE(published_configs_carry_the_numbers_of_the_spec_table) {
  struct expected {
    std::string name;
    tg::config_model_type type;
    int64_t hidden, intermediate, heads, kv, window, ple, max_pos;
    int layers, shared;
    bool k_eq_v, moe;
  };
  const std::vector<expected> table = {
      {"gemma-4-E2B", tg::config_model_type::gemma4, 1536, 6144, 8, 1, 512, 256, 131072, 35, 20,
       false, false},
      {"gemma-4-E4B", tg::config_model_type::gemma4, 2560, 10240, 8, 2, 512, 256, 131072, 42, 18,
       false, false},
      {"gemma-4-31B", tg::config_model_type::gemma4, 5376, 21504, 32, 16, 1024, 0, 262144, 60, 0,
       true, false},
      {"gemma-4-26B-A4B", tg::config_model_type::gemma4, 2816, 2112, 16, 8, 1024, 0, 262144, 30, 0,
       true, true},
      {"gemma-4-12B", tg::config_model_type::gemma4_unified, 3840, 15360, 16, 8, 1024, 0, 262144,
       48, 0, true, false},
  };
  for (const expected& e : table) {
    BOOST_TEST_CONTEXT(e.name) {
      const tg::model_config c = load_model(e.name);
      BOOST_TEST((c.model_type == e.type));
      BOOST_TEST(c.vocab_size == 262144);
      BOOST_TEST(c.hidden_size == e.hidden);
      BOOST_TEST(c.num_hidden_layers == e.layers);
      BOOST_TEST(c.intermediate_size == e.intermediate);
      BOOST_TEST(c.num_attention_heads == e.heads);
      BOOST_TEST(c.num_key_value_heads == e.kv);
      BOOST_TEST(c.head_dim == 256);
      BOOST_TEST(c.sliding_window == e.window);
      BOOST_TEST(c.hidden_size_per_layer_input == e.ple);
      BOOST_TEST(c.max_position_embeddings == e.max_pos);
      BOOST_TEST(c.num_kv_shared_layers == e.shared);
      BOOST_TEST(c.attention_k_eq_v == e.k_eq_v);
      BOOST_TEST(c.enable_moe_block == e.moe);
      BOOST_TEST(c.layers.size() == static_cast<std::size_t>(e.layers));
      BOOST_REQUIRE(c.final_logit_softcapping.has_value());
      BOOST_TEST(*c.final_logit_softcapping == 30.0);
      BOOST_TEST(c.rms_norm_eps == 1e-6);
      BOOST_TEST(c.tie_word_embeddings);
      BOOST_TEST(c.hidden_activation == "gelu_pytorch_tanh");
      BOOST_TEST((c.torch_dtype == tg::dtype::bfloat16));
      BOOST_TEST((c.rope_sliding == tg::rope_config{tg::rope_kind::standard, 1e4, 1.0, 1.0}));
      BOOST_TEST((c.rope_full == tg::rope_config{tg::rope_kind::proportional, 1e6, 0.25, 1.0}));
    }
  }
  const tg::model_config moe = load_model("gemma-4-26B-A4B");
  BOOST_TEST(moe.num_experts == 128);
  BOOST_TEST(moe.top_k_experts == 8);
  BOOST_TEST(moe.moe_intermediate_size == 704);
  BOOST_TEST(load_model("gemma-4-E2B").use_bidirectional_attention == "");
  BOOST_TEST(load_model("gemma-4-12B").use_bidirectional_attention == "vision");
}

BOOST_AUTO_TEST_CASE(published_layer_patterns_put_full_layers_where_the_spec_says) {
  BOOST_TEST(layers_of(load_model("gemma-4-E2B"), tg::layer_type::full) ==
                 (std::vector<int>{4, 9, 14, 19, 24, 29, 34}),
             boost::test_tools::per_element());
  BOOST_TEST(layers_of(load_model("gemma-4-E4B"), tg::layer_type::full) ==
                 (std::vector<int>{5, 11, 17, 23, 29, 35, 41}),
             boost::test_tools::per_element());
  BOOST_TEST(layers_of(load_model("gemma-4-26B-A4B"), tg::layer_type::full) ==
                 (std::vector<int>{5, 11, 17, 23, 29}),
             boost::test_tools::per_element());
  BOOST_TEST(layers_of(load_model("gemma-4-31B"), tg::layer_type::full).size() == 10u);
  BOOST_TEST(layers_of(load_model("gemma-4-12B"), tg::layer_type::full).size() == 8u);
}

BOOST_AUTO_TEST_CASE(full_layers_take_the_global_head_dim_and_kv_heads_only_with_k_eq_v) {
  const tg::model_config e2b = load_model("gemma-4-E2B");
  BOOST_TEST(layer(e2b, 4).head_dim == 512);
  BOOST_TEST(layer(e2b, 4).num_key_value_heads == 1);
  BOOST_TEST(!layer(e2b, 4).k_eq_v);
  BOOST_TEST(layer(e2b, 3).head_dim == 256);

  const tg::model_config e4b = load_model("gemma-4-E4B");
  BOOST_TEST(layer(e4b, 5).head_dim == 512);
  BOOST_TEST(layer(e4b, 5).num_key_value_heads == 2);

  const tg::model_config b31 = load_model("gemma-4-31B");
  BOOST_TEST(layer(b31, 5).head_dim == 512);
  BOOST_TEST(layer(b31, 5).num_key_value_heads == 4);
  BOOST_TEST(layer(b31, 5).k_eq_v);
  BOOST_TEST(layer(b31, 4).head_dim == 256);
  BOOST_TEST(layer(b31, 4).num_key_value_heads == 16);
  BOOST_TEST(!layer(b31, 4).k_eq_v);
  BOOST_TEST(layer(load_model("gemma-4-12B"), 47).num_key_value_heads == 1);

  // num_global_key_value_heads is ignored without attention_k_eq_v.
  const tg::model_config no_k_eq_v = parse_ok(small_text_config(
      R"("num_hidden_layers": 2, "attention_k_eq_v": false, "num_global_key_value_heads": 1)"));
  BOOST_TEST(layer(no_k_eq_v, 1).head_dim == 16);
  BOOST_TEST(layer(no_k_eq_v, 1).num_key_value_heads == 2);
  const tg::model_config with_k_eq_v = parse_ok(small_text_config(
      R"("num_hidden_layers": 2, "attention_k_eq_v": true, "num_global_key_value_heads": 1)"));
  BOOST_TEST(layer(with_k_eq_v, 1).num_key_value_heads == 1);
  BOOST_TEST(layer(with_k_eq_v, 0).num_key_value_heads == 2);
  // k_eq_v with a null global count keeps the sliding count.
  const tg::model_config null_global = parse_ok(small_text_config(
      R"("num_hidden_layers": 2, "attention_k_eq_v": true, "num_global_key_value_heads": null)"));
  BOOST_TEST(layer(null_global, 1).num_key_value_heads == 2);
}

BOOST_AUTO_TEST_CASE(layer_types_default_to_five_sliding_then_one_full) {
  const tg::model_config c = parse_ok(small_text_config(R"("num_hidden_layers": 12)"));
  BOOST_TEST(layers_of(c, tg::layer_type::full) == (std::vector<int>{5, 11}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(the_last_layer_is_forced_full_whatever_layer_types_says) {
  const tg::model_config c = parse_ok(small_text_config(
      R"("num_hidden_layers": 3,
         "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention"])"));
  BOOST_TEST(layers_of(c, tg::layer_type::full) == (std::vector<int>{2}),
             boost::test_tools::per_element());
  BOOST_TEST(layer(c, 2).head_dim == 16);
  const tg::model_config d = parse_ok(small_text_config(R"("num_hidden_layers": 8)"));
  BOOST_TEST(layers_of(d, tg::layer_type::full) == (std::vector<int>{5, 7}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(class_defaults_apply_to_absent_keys) {
  const tg::model_config c = parse_ok(R"({"model_type": "gemma4_text"})");
  BOOST_TEST(c.vocab_size == 262144);
  BOOST_TEST(c.hidden_size == 2304);
  BOOST_TEST(c.num_hidden_layers == 30);
  BOOST_TEST(c.intermediate_size == 9216);
  BOOST_TEST(c.num_attention_heads == 8);
  BOOST_TEST(c.num_key_value_heads == 4);
  BOOST_TEST(layer(c, 0).head_dim == 256);
  BOOST_TEST(layer(c, 5).head_dim == 512);
  BOOST_TEST(layer(c, 5).num_key_value_heads == 4);
  BOOST_TEST(c.sliding_window == 512);
  BOOST_TEST(c.hidden_size_per_layer_input == 256);
  BOOST_TEST(c.vocab_size_per_layer_input == 262144);
  BOOST_TEST(!c.final_logit_softcapping.has_value());
  BOOST_TEST(c.max_position_embeddings == 131072);
  BOOST_TEST(c.tie_word_embeddings);
  BOOST_TEST(c.pad_token_id.value_or(-1) == 0);
  BOOST_TEST(c.bos_token_id.value_or(-1) == 2);
  BOOST_TEST(c.eos_token_ids == (std::vector<int64_t>{1}), boost::test_tools::per_element());
  BOOST_TEST(!c.torch_dtype.has_value());
  BOOST_TEST((c.rope_sliding == tg::rope_config{tg::rope_kind::standard, 1e4, 1.0, 1.0}));
  BOOST_TEST((c.rope_full == tg::rope_config{tg::rope_kind::proportional, 1e6, 0.25, 1.0}));
}

BOOST_AUTO_TEST_CASE(the_per_layer_config_form_parses_to_the_same_config_as_the_flat_form) {
  const tg::model_config flat = load_model("tiny-all");
  auto r = tg::load_model_config(source_path("tests/data/models/tiny-all-per-layer/config.json"));
  BOOST_REQUIRE_MESSAGE(r.has_value(), (r.has_value() ? "" : r.error().message()));
  BOOST_TEST((flat == *r));
}

BOOST_AUTO_TEST_CASE(per_layer_config_wins_over_flat_keys_when_both_are_present) {
  const tg::model_config c = parse_ok(small_text_config(
      R"("num_hidden_layers": 2, "attention_k_eq_v": true, "num_global_key_value_heads": 2,
         "per_layer_config": {"01": {"head_dim": 32, "num_key_value_heads": 1}})"));
  BOOST_TEST(layer(c, 1).head_dim == 32);
  BOOST_TEST(layer(c, 1).num_key_value_heads == 1);
  // A full layer without an entry keeps the global values: the flat keys are not consulted.
  const tg::model_config d =
      parse_ok(small_text_config(R"("num_hidden_layers": 2, "per_layer_config": {})"));
  BOOST_TEST(layer(d, 1).head_dim == 8);
}

BOOST_AUTO_TEST_CASE(kv_shared_layers_read_the_last_store_layer_of_their_type) {
  const tg::model_config e2b = load_model("gemma-4-E2B");
  BOOST_TEST(e2b.first_kv_shared_layer() == 15);
  for (int l = 0; l < 35; ++l) {
    BOOST_TEST_CONTEXT("E2B layer " << l) {
      const tg::layer_config& x = layer(e2b, l);
      BOOST_TEST(x.is_kv_shared == (l >= 15));
      const int expected = l < 15 ? l : x.type == tg::layer_type::full ? 14 : 13;
      BOOST_TEST(x.kv_source_layer == expected);
      BOOST_TEST(x.is_kv_store == (l == 13 || l == 14));
    }
  }
  const tg::model_config e4b = load_model("gemma-4-E4B");
  BOOST_TEST(layer(e4b, 24).kv_source_layer == 22);
  BOOST_TEST(layer(e4b, 29).kv_source_layer == 23);
  BOOST_TEST(layer(e4b, 41).kv_source_layer == 23);

  const tg::model_config tiny = load_model("tiny-all");
  const std::vector<int> source = {0, 1, 2, 1, 1, 2};
  for (int l = 0; l < 6; ++l) BOOST_TEST(layer(tiny, l).kv_source_layer == source[l]);
  BOOST_TEST(!layer(tiny, 0).is_kv_store);
  BOOST_TEST(layer(tiny, 1).is_kv_store);
  BOOST_TEST(layer(tiny, 2).is_kv_store);
  BOOST_TEST(layer(tiny, 3).is_kv_shared);

  const tg::model_config dense = load_model("gemma-4-31B");
  for (const tg::layer_config& x : dense.layers) {
    BOOST_TEST(!x.is_kv_shared);
    BOOST_TEST(!x.is_kv_store);
  }
}

BOOST_AUTO_TEST_CASE(the_double_wide_mlp_applies_only_to_kv_shared_layers) {
  const tg::model_config e2b = load_model("gemma-4-E2B");
  for (int l = 0; l < 35; ++l) {
    BOOST_TEST(layer(e2b, l).intermediate_size == (l >= 15 ? 12288 : 6144));
  }
  const tg::model_config tiny = load_model("tiny-all");
  for (int l = 0; l < 6; ++l) BOOST_TEST(layer(tiny, l).intermediate_size == (l >= 3 ? 192 : 96));
  const tg::model_config dense = load_model("tiny-dense");  // double-wide set, nothing shared
  BOOST_TEST(dense.use_double_wide_mlp);
  for (int l = 0; l < 6; ++l) BOOST_TEST(layer(dense, l).intermediate_size == 96);
  for (int l = 0; l < 42; ++l) {
    BOOST_TEST(layer(load_model("gemma-4-E4B"), l).intermediate_size == 10240);
  }
}

BOOST_AUTO_TEST_CASE(tiny_test_models_have_the_features_of_the_spec) {
  const tg::model_config all = load_model("tiny-all");
  BOOST_TEST(all.hidden_size_per_layer_input == 8);
  BOOST_TEST(all.vocab_size_per_layer_input == 256);
  BOOST_TEST(all.enable_moe_block);
  BOOST_TEST(all.num_experts == 4);
  BOOST_TEST(all.top_k_experts == 2);
  BOOST_TEST(all.moe_intermediate_size == 24);
  BOOST_TEST(all.sliding_window == 4);
  BOOST_TEST(*all.final_logit_softcapping == 3.0);
  BOOST_TEST(layer(all, 2).head_dim == 32);
  BOOST_TEST(layer(all, 2).num_key_value_heads == 1);
  BOOST_TEST(layer(all, 2).k_eq_v);
  BOOST_TEST(layer(all, 0).head_dim == 16);
  BOOST_TEST(layer(all, 0).num_key_value_heads == 2);

  const tg::model_config e = load_model("tiny-e");
  BOOST_TEST(!e.enable_moe_block);
  BOOST_TEST(e.num_experts == 0);
  BOOST_TEST(layer(e, 2).head_dim == 32);
  BOOST_TEST(layer(e, 2).num_key_value_heads == 2);
  BOOST_TEST(!layer(e, 2).k_eq_v);
  BOOST_TEST(e.num_kv_shared_layers == 3);

  const tg::model_config dense = load_model("tiny-dense");
  BOOST_TEST(dense.hidden_size_per_layer_input == 0);
  BOOST_TEST(dense.vocab_size_per_layer_input == 0);
  BOOST_TEST(dense.first_kv_shared_layer() == 6);
  BOOST_TEST(dense.enable_moe_block);
}

BOOST_AUTO_TEST_CASE(unified_configs_have_no_ple_or_moe_and_a_1024_window_by_default) {
  const tg::model_config b12 = load_model("gemma-4-12B");
  BOOST_TEST(b12.hidden_size_per_layer_input == 0);
  BOOST_TEST(!b12.enable_moe_block);
  const tg::model_config c = parse_ok(
      R"({"model_type": "gemma4_unified_text", "num_hidden_layers": 2,
          "hidden_size_per_layer_input": 256, "enable_moe_block": true})");
  BOOST_TEST(c.sliding_window == 1024);
  BOOST_TEST(c.max_position_embeddings == 262144);
  BOOST_TEST(c.use_bidirectional_attention == "vision");
  BOOST_TEST(c.hidden_size_per_layer_input == 0);
  BOOST_TEST(!c.enable_moe_block);
}

BOOST_AUTO_TEST_CASE(text_only_and_multimodal_files_give_the_same_text_config) {
  const tg::model_config multimodal = load_model("gemma-4-E2B");
  std::ifstream in(source_path("configs/models/gemma-4-E2B/config.json"));
  nlohmann::json j = nlohmann::json::parse(in);
  nlohmann::json text = j["text_config"];
  text["dtype"] = j["dtype"];
  auto r = tg::parse_model_config(text.dump(), "text-only.json");
  BOOST_REQUIRE_MESSAGE(r.has_value(), (r.has_value() ? "" : r.error().message()));
  tg::model_config text_only = *r;
  BOOST_TEST((text_only.model_type == tg::config_model_type::gemma4_text));
  BOOST_TEST(text_only.architecture == "Gemma4ForCausalLM");
  BOOST_TEST(multimodal.architecture == "Gemma4ForConditionalGeneration");
  text_only.model_type = multimodal.model_type;
  text_only.architecture = multimodal.architecture;
  BOOST_TEST((text_only == multimodal));
}

BOOST_AUTO_TEST_CASE(keys_that_do_not_change_the_text_math_are_ignored) {
  const tg::model_config c = parse_ok(
      R"({"model_type": "gemma4", "architectures": ["Gemma4ForConditionalGeneration"],
          "vision_config": {"model_type": "gemma4_vision", "hidden_size": "anything"},
          "audio_config": null, "transformers_version": "5.5.0", "image_token_id": 258880,
          "text_config": {"num_hidden_layers": 2, "initializer_range": 0.02, "use_cache": true,
                          "rope_scaling": null, "eos_token_id": [1, 106]}})");
  BOOST_TEST(c.num_hidden_layers == 2);
  BOOST_TEST(c.eos_token_ids == (std::vector<int64_t>{1, 106}), boost::test_tools::per_element());
  BOOST_TEST(c.is_multimodal_file());
}

BOOST_AUTO_TEST_CASE(a_config_loads_from_its_file_or_its_directory) {
  auto from_dir = tg::load_model_config(source_path("configs/models/tiny-all"));
  auto from_file = tg::load_model_config(source_path("configs/models/tiny-all/config.json"));
  BOOST_REQUIRE(from_dir.has_value());
  BOOST_REQUIRE(from_file.has_value());
  BOOST_TEST((*from_dir == *from_file));
}

BOOST_AUTO_TEST_CASE(the_eos_ids_of_generation_config_json_beside_the_config_join_its_own) {
  // Gemma 4's config.json names <eos> and <turn|>; its generation config adds <|tool_response>.
  const auto dir = std::filesystem::temp_directory_path() / ("tandem-genconfig-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(source_path("configs/models/tiny-all/config.json"), dir / "config.json",
                             std::filesystem::copy_options::overwrite_existing);
  const auto write = [&](const std::string& text) { std::ofstream(dir / "generation_config.json") << text; };
  const auto own = tg::load_model_config(dir / "config.json");  // a file: its own ids only
  BOOST_REQUIRE(own.has_value());
  write(R"({"bos_token_id": 2, "eos_token_id": [106, 1, 50], "pad_token_id": 0})");
  auto c = tg::load_model_config(dir);
  BOOST_REQUIRE_MESSAGE(c.has_value(), (c.has_value() ? "" : c.error().message()));
  std::vector<int64_t> want = own->eos_token_ids;
  for (const int64_t id : {106, 1, 50})
    if (std::find(want.begin(), want.end(), id) == want.end()) want.push_back(id);
  BOOST_TEST(c->eos_token_ids == want, boost::test_tools::per_element());
  write(R"({"eos_token_id": 7})");
  c = tg::load_model_config(dir);
  BOOST_REQUIRE(c.has_value());
  BOOST_TEST(c->eos_token_ids.back() == 7);
  write(R"({"do_sample": true})");  // no eos ids: config.json's stand
  BOOST_TEST(tg::load_model_config(dir)->eos_token_ids == own->eos_token_ids, boost::test_tools::per_element());
  write(R"({"eos_token_id": "x"})");
  const auto bad = tg::load_model_config(dir);
  BOOST_REQUIRE(!bad.has_value());
  const std::string said = bad.error().message();
  BOOST_TEST(said == (dir / "generation_config.json").string() + ": eos_token_id: expected a non-negative integer, got \"x\"");
  write("{not json");
  BOOST_TEST(!tg::load_model_config(dir).has_value());
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(malformed_json_is_reported_with_its_line_and_column) {
  const tg::status s =
      parse_error("{\n  \"model_type\": \"gemma4_text\",\n  \"hidden_size\": 64,,\n}",
                  "configs/models/x/config.json");
  BOOST_TEST((s.code() == tg::status_code::invalid_argument));
  BOOST_TEST(
      s.message().starts_with("configs/models/x/config.json: invalid JSON at line 3, column 21: "),
      s.message());
  const tg::status truncated = parse_error("{\"model_type\": \"gemma4_text\"");
  BOOST_TEST(truncated.message().find("invalid JSON at line 1") != std::string::npos,
             truncated.message());
  BOOST_TEST(parse_error("[1, 2]").message().find("expected a JSON object") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_key_given_twice_is_refused_instead_of_the_last_one_winning) {
  BOOST_TEST(parse_error(small_text_config(R"("vocab_size": 64)")).message() == "inline.json: duplicate key 'vocab_size'");
  BOOST_TEST(parse_error(R"({"model_type": "gemma4", "text_config": {"hidden_size": 8, "hidden_size": 8}})").message() ==
             "inline.json: duplicate key 'text_config.hidden_size'");
}

BOOST_AUTO_TEST_CASE(architectures_must_name_the_class_of_the_model_type) {
  BOOST_TEST(parse_ok(small_text_config(R"("architectures": ["Gemma4ForCausalLM"])")).architecture == "Gemma4ForCausalLM");
  BOOST_TEST(parse_ok(small_text_config("")).architecture == "Gemma4ForCausalLM");
  BOOST_TEST(parse_error(small_text_config(R"("architectures": ["Gemma4TextModel"])")).message() ==
             "inline.json: architectures: unsupported architecture \"Gemma4TextModel\" for model_type \"gemma4_text\" "
             "(tandem reads Gemma4ForCausalLM)");
}

BOOST_AUTO_TEST_CASE(a_wrong_typed_or_out_of_range_field_is_reported_with_its_key_path) {
  const tg::status negative =
      parse_error(R"({"model_type": "gemma4", "text_config": {"hidden_size": -3}})",
                  "configs/models/x/config.json");
  BOOST_TEST(
      negative.message() ==
      "configs/models/x/config.json: text_config.hidden_size: expected a positive integer, got -3");
  const tg::status text = parse_error(small_text_config(R"("num_hidden_layers": "six")"));
  BOOST_TEST(text.message() ==
             R"(inline.json: num_hidden_layers: expected a positive integer, got "six")");
  const tg::status fraction = parse_error(small_text_config(R"("sliding_window": 32.5)"));
  BOOST_TEST(fraction.message() ==
             "inline.json: sliding_window: expected a positive integer, got 32.5");
  const tg::status boolean = parse_error(small_text_config(R"("attention_k_eq_v": 1)"));
  BOOST_TEST(boolean.message() == "inline.json: attention_k_eq_v: expected true or false, got 1");
  const tg::status entry = parse_error(small_text_config(
      R"("num_hidden_layers": 2, "layer_types": ["sliding_attention", "local"])"));
  BOOST_TEST(entry.message().starts_with("inline.json: layer_types[1]: "), entry.message());
  const tg::status length = parse_error(
      small_text_config(R"("num_hidden_layers": 3, "layer_types": ["full_attention"])"));
  BOOST_TEST(length.message().starts_with("inline.json: layer_types: has 1 entries"),
             length.message());
  const tg::status theta = parse_error(small_text_config(
      R"("rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": "big"},
                             "full_attention": {"rope_type": "default", "rope_theta": 1e6}})"));
  BOOST_TEST(
      theta.message().starts_with("inline.json: rope_parameters.sliding_attention.rope_theta: "),
      theta.message());
  const tg::status gqa = parse_error(small_text_config(
      R"("num_hidden_layers": 2, "per_layer_config": {"01": {"num_key_value_heads": 3}})"));
  BOOST_TEST(gqa.message().starts_with("inline.json: per_layer_config.01.num_key_value_heads: "),
             gqa.message());
  const tg::status index = parse_error(
      small_text_config(R"("num_hidden_layers": 2, "per_layer_config": {"07": {"head_dim": 16}})"));
  BOOST_TEST(index.message().starts_with("inline.json: per_layer_config.07: "), index.message());
  const tg::status moe =
      parse_error(small_text_config(R"("enable_moe_block": true, "num_experts": 4)"));
  BOOST_TEST(moe.message().starts_with("inline.json: top_k_experts: missing"), moe.message());
}

BOOST_AUTO_TEST_CASE(an_unknown_model_type_is_refused_by_name) {
  const tg::status s = parse_error(R"({"model_type": "llama", "hidden_size": 64})");
  BOOST_TEST((s.code() == tg::status_code::unsupported));
  BOOST_TEST(s.message().starts_with(R"(inline.json: model_type: unsupported model type "llama")"),
             s.message());
  BOOST_TEST(parse_error(R"({"hidden_size": 64})").message() == "inline.json: model_type: missing");
  const tg::status mismatch =
      parse_error(R"({"model_type": "gemma4", "text_config": {"model_type": "gemma3_text"}})");
  BOOST_TEST(mismatch.message().starts_with("inline.json: text_config.model_type: "),
             mismatch.message());
  const tg::status no_text = parse_error(R"({"model_type": "gemma4_unified"})");
  BOOST_TEST(no_text.message().starts_with("inline.json: text_config: missing"), no_text.message());
}

BOOST_AUTO_TEST_CASE(unsupported_rope_types_and_bidirectional_all_are_refused) {
  const tg::status rope = parse_error(small_text_config(
      R"("rope_parameters": {"sliding_attention": {"rope_type": "yarn", "rope_theta": 1e4},
                             "full_attention": {"rope_type": "default", "rope_theta": 1e6}})"));
  BOOST_TEST((rope.code() == tg::status_code::unsupported));
  BOOST_TEST(
      rope.message().starts_with("inline.json: rope_parameters.sliding_attention.rope_type: "),
      rope.message());
  BOOST_TEST(rope.message().find("\"yarn\"") != std::string::npos);
  const tg::status all = parse_error(small_text_config(R"("use_bidirectional_attention": "all")"));
  BOOST_TEST((all.code() == tg::status_code::unsupported));
  BOOST_TEST(all.message().starts_with("inline.json: use_bidirectional_attention: "),
             all.message());
  const tg::status missing_type = parse_error(small_text_config(
      R"("rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 1e4}})"));
  BOOST_TEST(
      missing_type.message().starts_with("inline.json: rope_parameters.full_attention: missing"),
      missing_type.message());
}

BOOST_AUTO_TEST_CASE(a_missing_file_is_not_found_and_names_the_path) {
  const std::filesystem::path missing = source_path("configs/models/no-such-model");
  auto r = tg::load_model_config(missing);
  BOOST_REQUIRE(!r.has_value());
  BOOST_TEST((r.error().code() == tg::status_code::not_found));
  BOOST_TEST(r.error().message().find("no-such-model") != std::string::npos, r.error().message());
  // A directory without config.json.
  auto dir = tg::load_model_config(source_path("configs"));
  BOOST_REQUIRE(!dir.has_value());
  BOOST_TEST((dir.error().code() == tg::status_code::not_found));
  BOOST_TEST(dir.error().message().find("config.json") != std::string::npos, dir.error().message());
}

BOOST_AUTO_TEST_SUITE_END()
