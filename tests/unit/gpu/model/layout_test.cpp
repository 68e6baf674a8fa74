// Tests of the tensor table (gpu/model/layout.h): the published parameter counts and projection
// shapes, which tensors exist on shared / k_eq_v / MoE / PLE layers, aligned offsets, names
// and the KV-cache size per token.
#include "gpu/model/layout.h"

#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <string>
#include <vector>

namespace tg = tandem::gpu;

namespace {

tg::model_config load_model(const std::string& name) {
  auto r =
      tg::load_model_config(std::filesystem::path(TANDEM_SOURCE_DIR) / "configs/models" / name);
  BOOST_REQUIRE_MESSAGE(r.has_value(), (r.has_value() ? "" : r.error().message()));
  return *r;
}

// Shape of `name` in `layout`, empty when the tensor is absent.
std::vector<int64_t> shape_of(const tg::model_layout& layout, const std::string& name) {
  const tg::tensor_entry* t = layout.find(name);
  return t ? t->shape : std::vector<int64_t>{};
}

using shape = std::vector<int64_t>;

}  // namespace

BOOST_AUTO_TEST_SUITE(gpu_model_layout)

BOOST_AUTO_TEST_CASE(parameter_counts_match_the_published_sizes) {
  const std::vector<std::pair<std::string, int64_t>> counts = {
      {"gemma-4-E2B", 4'628'569'379},  {"gemma-4-E4B", 7'463'013'418},
      {"gemma-4-31B", 30'697'345'340}, {"gemma-4-26B-A4B", 25'233'141'790},
      {"gemma-4-12B", 11'907'350'320},
  };
  for (const auto& [name, count] : counts) {
    BOOST_TEST_CONTEXT(name) {
      const tg::model_config c = load_model(name);
      const tg::model_layout layout = tg::build_layout(c, tg::dtype::bfloat16);
      BOOST_TEST(layout.parameter_count == count);
      BOOST_TEST(layout.total_bytes() == 2 * layout.total_elements);
      BOOST_TEST(layout.total_elements >= count);
      BOOST_TEST(layout.total_elements < count + tg::layout_alignment_elements * static_cast<int64_t>(layout.tensors.size()));
      // The per-layer counts and the top-level tensors add up to the same total.
      int64_t sum = 0;
      for (int l = 0; l < c.num_hidden_layers; ++l) sum += tg::layer_parameter_count(c, l);
      for (std::size_t k = 0; k < layout.layer_begin.front(); ++k) {
        sum += layout.tensors[k].elements();
      }
      BOOST_TEST(sum == count);
    }
  }
}

BOOST_AUTO_TEST_CASE(the_e2b_ple_table_alone_explains_its_effective_size) {
  const tg::model_layout layout = tg::build_layout(load_model("gemma-4-E2B"), tg::dtype::bfloat16);
  const int64_t table = layout.find("embed_tokens_per_layer.weight")->elements();
  BOOST_TEST(layout.parameter_count - table == 2'279'759'139);  // "2.3B effective"
}

BOOST_AUTO_TEST_CASE(projection_shapes_match_the_spec_table_for_every_published_model) {
  struct row {
    std::string model;
    int sliding, full;                         // one layer of each type
    shape q_s, kv_s, o_s, q_f, k_f, v_f, o_f;  // v_f empty: no v_proj
  };
  const std::vector<row> table = {
      {"gemma-4-E2B",
       0,
       4,
       {2048, 1536},
       {256, 1536},
       {1536, 2048},
       {4096, 1536},
       {512, 1536},
       {512, 1536},
       {1536, 4096}},
      {"gemma-4-E4B",
       0,
       5,
       {2048, 2560},
       {512, 2560},
       {2560, 2048},
       {4096, 2560},
       {1024, 2560},
       {1024, 2560},
       {2560, 4096}},
      {"gemma-4-31B",
       0,
       5,
       {8192, 5376},
       {4096, 5376},
       {5376, 8192},
       {16384, 5376},
       {2048, 5376},
       {},
       {5376, 16384}},
      {"gemma-4-26B-A4B",
       0,
       5,
       {4096, 2816},
       {2048, 2816},
       {2816, 4096},
       {8192, 2816},
       {1024, 2816},
       {},
       {2816, 8192}},
      {"gemma-4-12B",
       0,
       5,
       {4096, 3840},
       {2048, 3840},
       {3840, 4096},
       {8192, 3840},
       {512, 3840},
       {},
       {3840, 8192}},
  };
  using boost::test_tools::per_element;
  for (const row& r : table) {
    BOOST_TEST_CONTEXT(r.model) {
      const tg::model_layout layout = tg::build_layout(load_model(r.model), tg::dtype::bfloat16);
      const std::string s = "layers." + std::to_string(r.sliding) + ".self_attn.";
      const std::string f = "layers." + std::to_string(r.full) + ".self_attn.";
      BOOST_TEST(shape_of(layout, s + "q_proj.weight") == r.q_s, per_element());
      BOOST_TEST(shape_of(layout, s + "k_proj.weight") == r.kv_s, per_element());
      BOOST_TEST(shape_of(layout, s + "v_proj.weight") == r.kv_s, per_element());
      BOOST_TEST(shape_of(layout, s + "o_proj.weight") == r.o_s, per_element());
      BOOST_TEST(shape_of(layout, f + "q_proj.weight") == r.q_f, per_element());
      BOOST_TEST(shape_of(layout, f + "k_proj.weight") == r.k_f, per_element());
      BOOST_TEST(shape_of(layout, f + "v_proj.weight") == r.v_f, per_element());
      BOOST_TEST(shape_of(layout, f + "o_proj.weight") == r.o_f, per_element());
      BOOST_TEST(shape_of(layout, s + "q_norm.weight") == shape{256}, per_element());
      BOOST_TEST(shape_of(layout, f + "k_norm.weight") == shape{512}, per_element());
    }
  }
}

BOOST_AUTO_TEST_CASE(moe_and_ple_tensors_have_the_published_shapes) {
  using boost::test_tools::per_element;
  const tg::model_layout moe = tg::build_layout(load_model("gemma-4-26B-A4B"), tg::dtype::bfloat16);
  BOOST_TEST(shape_of(moe, "layers.7.experts.gate_up_proj") == (shape{128, 1408, 2816}),
             per_element());
  BOOST_TEST(shape_of(moe, "layers.7.experts.down_proj") == (shape{128, 2816, 704}), per_element());
  BOOST_TEST(shape_of(moe, "layers.7.router.proj.weight") == (shape{128, 2816}), per_element());
  BOOST_TEST(shape_of(moe, "layers.7.router.per_expert_scale") == shape{128}, per_element());
  BOOST_TEST(shape_of(moe, "layers.7.mlp.gate_proj.weight") == (shape{2112, 2816}), per_element());
  BOOST_TEST(shape_of(moe, "layers.7.pre_feedforward_layernorm_2.weight") == shape{2816},
             per_element());
  BOOST_TEST(moe.find("embed_tokens_per_layer.weight") == nullptr);

  const tg::model_layout e2b = tg::build_layout(load_model("gemma-4-E2B"), tg::dtype::bfloat16);
  BOOST_TEST(shape_of(e2b, "embed_tokens_per_layer.weight") == (shape{262144, 8960}),
             per_element());
  BOOST_TEST(shape_of(e2b, "per_layer_model_projection.weight") == (shape{8960, 1536}),
             per_element());
  BOOST_TEST(shape_of(e2b, "per_layer_projection_norm.weight") == shape{256}, per_element());
  BOOST_TEST(shape_of(e2b, "layers.3.per_layer_input_gate.weight") == (shape{256, 1536}),
             per_element());
  BOOST_TEST(shape_of(e2b, "layers.3.per_layer_projection.weight") == (shape{1536, 256}),
             per_element());
  BOOST_TEST(shape_of(e2b, "layers.3.layer_scalar") == shape{1}, per_element());
  BOOST_TEST(shape_of(e2b, "layers.20.mlp.down_proj.weight") == (shape{1536, 12288}),
             per_element());
  BOOST_TEST(shape_of(e2b, "layers.14.mlp.down_proj.weight") == (shape{1536, 6144}), per_element());
  BOOST_TEST(e2b.find("layers.3.router.proj.weight") == nullptr);

  const tg::model_layout e4b = tg::build_layout(load_model("gemma-4-E4B"), tg::dtype::bfloat16);
  BOOST_TEST(shape_of(e4b, "embed_tokens_per_layer.weight") == (shape{262144, 10752}),
             per_element());
  BOOST_TEST(shape_of(e4b, "per_layer_model_projection.weight") == (shape{10752, 2560}),
             per_element());
}

BOOST_AUTO_TEST_CASE(kv_shared_layers_have_no_key_or_value_weights) {
  const tg::model_layout e2b = tg::build_layout(load_model("gemma-4-E2B"), tg::dtype::bfloat16);
  for (int l = 0; l < 35; ++l) {
    BOOST_TEST_CONTEXT("layer " << l) {
      const std::string p = "layers." + std::to_string(l) + ".self_attn.";
      const bool has_kv = l < 15;
      BOOST_TEST((e2b.find(p + "k_proj.weight") != nullptr) == has_kv);
      BOOST_TEST((e2b.find(p + "k_norm.weight") != nullptr) == has_kv);
      BOOST_TEST((e2b.find(p + "v_proj.weight") != nullptr) == has_kv);
      BOOST_TEST(e2b.find(p + "q_proj.weight") != nullptr);
      BOOST_TEST(e2b.find(p + "q_norm.weight") != nullptr);
    }
  }
  const tg::model_layout tiny = tg::build_layout(load_model("tiny-all"), tg::dtype::float32);
  BOOST_TEST(tiny.find("layers.1.self_attn.v_proj.weight") != nullptr);
  BOOST_TEST(tiny.find("layers.2.self_attn.k_proj.weight") != nullptr);
  BOOST_TEST(tiny.find("layers.2.self_attn.v_proj.weight") == nullptr);  // k_eq_v full layer
  BOOST_TEST(tiny.find("layers.3.self_attn.k_proj.weight") == nullptr);
  BOOST_TEST(tiny.find("layers.5.self_attn.k_norm.weight") == nullptr);
  const tg::model_layout tiny_e = tg::build_layout(load_model("tiny-e"), tg::dtype::float32);
  BOOST_TEST(shape_of(tiny_e, "layers.2.self_attn.v_proj.weight") == (shape{64, 64}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(offsets_are_aligned_and_increasing_in_a_deterministic_order) {
  const tg::model_config c = load_model("tiny-all");
  const tg::model_layout layout = tg::build_layout(c, tg::dtype::float32);
  const std::vector<std::string> first = {
      "embed_tokens.weight",
      "embed_tokens_per_layer.weight",
      "per_layer_model_projection.weight",
      "per_layer_projection_norm.weight",
      "norm.weight",
      "layers.0.input_layernorm.weight",
      "layers.0.self_attn.q_proj.weight",
  };
  for (std::size_t k = 0; k < first.size(); ++k) BOOST_TEST(layout.tensors[k].name == first[k]);
  BOOST_TEST(layout.tensors.back().name == "layers.5.layer_scalar");

  int64_t next = 0, count = 0;
  for (std::size_t k = 0; k < layout.tensors.size(); ++k) {
    const tg::tensor_entry& t = layout.tensors[k];
    // The next aligned offset: after layers.0.layer_scalar [1] the following tensor is aligned too.
    BOOST_TEST(t.offset_elements == (next + 63) / 64 * 64, t.name);
    BOOST_TEST((t.type == tg::dtype::float32));
    BOOST_TEST(layout.find(t.name) == &t);
    next = t.offset_elements + t.elements();
    count += t.elements();
  }
  BOOST_TEST(tg::layout_alignment_elements == 64);
  BOOST_TEST(layout.total_elements == next);
  BOOST_TEST(layout.parameter_count == count);
  BOOST_TEST(layout.index.size() == layout.tensors.size());  // names are unique

  BOOST_REQUIRE(layout.layer_begin.size() == 7u);
  BOOST_TEST(layout.layer_begin.back() == layout.tensors.size());
  for (int l = 0; l < 6; ++l) {
    int64_t elements = 0;
    for (std::size_t k = layout.layer_begin[l]; k < layout.layer_begin[l + 1]; ++k) {
      BOOST_TEST(layout.tensors[k].layer == l);
      elements += layout.tensors[k].elements();
    }
    BOOST_TEST(elements == tg::layer_parameter_count(c, l));
  }
  for (std::size_t k = 0; k < layout.layer_begin.front(); ++k) {
    BOOST_TEST(layout.tensors[k].layer == -1);
  }

  // Building twice gives the same table.
  const tg::model_layout again = tg::build_layout(c, tg::dtype::float32);
  BOOST_REQUIRE(again.tensors.size() == layout.tensors.size());
  for (std::size_t k = 0; k < layout.tensors.size(); ++k) {
    BOOST_TEST(again.tensors[k].name == layout.tensors[k].name);
    BOOST_TEST(again.tensors[k].offset_elements == layout.tensors[k].offset_elements);
  }
  BOOST_TEST(layout.find("layers.6.input_layernorm.weight") == nullptr);
  BOOST_TEST(layout.find("lm_head.weight") == nullptr);  // tied
}

BOOST_AUTO_TEST_CASE(a_layer_parameter_count_adds_every_tensor_of_the_layer) {
  const tg::model_config c = load_model("tiny-all");
  // Layer 0 of tiny-all (H 64, nh 4, kv 2, d 16, I 96, P 8, E 4, Im 24): 4 norms 256, q 4096,
  // q_norm 16, k 2048, k_norm 16, v 2048, o 4096, MLP 18432, router 256+64+4, experts 12288+6144,
  // 3 MoE norms 192, PLE 512+512+64, layer_scalar 1.
  BOOST_TEST(tg::layer_parameter_count(c, 0) == 51045);
  // Layer 3 shares K/V (no k, k_norm, v) and has the double-wide MLP (3*192*64).
  BOOST_TEST(tg::layer_parameter_count(c, 3) == 51045 - 2048 - 16 - 2048 + 18432);
  BOOST_TEST(tg::layer_parameter_count(c, 6) == 0);
  BOOST_TEST(tg::layer_parameter_count(c, -1) == 0);
}

BOOST_AUTO_TEST_CASE(an_untied_head_adds_lm_head_after_the_final_norm) {
  auto r = tg::parse_model_config(
      R"({"model_type": "gemma4_text", "vocab_size": 32, "hidden_size": 16, "num_hidden_layers": 1,
          "tie_word_embeddings": false})",
      "untied.json");
  BOOST_REQUIRE_MESSAGE(r.has_value(), (r.has_value() ? "" : r.error().message()));
  const tg::model_layout layout = tg::build_layout(*r, tg::dtype::float32);
  BOOST_TEST(shape_of(layout, "lm_head.weight") == (shape{32, 16}),
             boost::test_tools::per_element());
  const tg::tensor_entry* head = layout.find("lm_head.weight");
  BOOST_TEST(head->layer == -1);
  BOOST_TEST(hf_full_name(*r, *head) == "lm_head.weight");
}

BOOST_AUTO_TEST_CASE(the_text_prefix_depends_on_the_file_model_type) {
  const tg::model_config multimodal = load_model("gemma-4-E2B");
  const tg::model_config unified = load_model("gemma-4-12B");
  const tg::model_config text_only = load_model("tiny-all");
  BOOST_TEST(tg::hf_text_prefix(multimodal) == "model.language_model.");
  BOOST_TEST(tg::hf_text_prefix(unified) == "model.language_model.");
  BOOST_TEST(tg::hf_text_prefix(text_only) == "model.");
  const tg::model_layout layout = tg::build_layout(text_only, tg::dtype::float32);
  BOOST_TEST(tg::hf_full_name(text_only, layout.tensors.front()) == "model.embed_tokens.weight");
}

BOOST_AUTO_TEST_CASE(kv_cache_bytes_per_token_count_only_non_shared_layers) {
  // E2B: layers 0..14 own K/V: 12 sliding (2*1*256) and 3 full (2*1*512) elements per token.
  BOOST_TEST(tg::kv_cache_bytes_per_token(load_model("gemma-4-E2B"), tg::dtype::bfloat16) ==
             (12 * 512 + 3 * 1024) * 2);
  // 31B: 50 sliding (2*16*256) and 10 full (2*4*512; V stored apart although k_eq_v).
  BOOST_TEST(tg::kv_cache_bytes_per_token(load_model("gemma-4-31B"), tg::dtype::bfloat16) ==
             (50 * 8192 + 10 * 4096) * 2);
  // tiny-all: layers 0, 1 sliding (2*2*16), layer 2 full (2*1*32), float32.
  BOOST_TEST(tg::kv_cache_bytes_per_token(load_model("tiny-all"), tg::dtype::float32) ==
             (2 * 64 + 64) * 4);
}

BOOST_AUTO_TEST_SUITE_END()
