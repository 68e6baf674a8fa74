// Planning a text-only load from tensor names alone (gpu/model/weight_plan.h): the index of a
// published E2B checkpoint (tests/data/checkpoints/gemma-4-E2B, names written from the
// architecture reference independently of the layout code, no weights) maps every name to a
// layout offset, an ignored K/V weight or a skipped non-text part.
#include <boost/test/unit_test.hpp>

#include <fstream>
#include <map>
#include <sstream>

#include "gpu/model/checkpoint_index.h"
#include "gpu/model/weight_plan.h"

namespace tg = tandem::gpu;

namespace {

const std::filesystem::path e2b = std::filesystem::path(TANDEM_SOURCE_DIR) / "tests/data/checkpoints/gemma-4-E2B";

tg::checkpoint_index e2b_index() {
  std::ifstream in(e2b / "model.safetensors.index.json");
  std::stringstream text;
  text << in.rdbuf();
  auto index = tg::parse_checkpoint_index(text.str(), "e2b index");
  BOOST_REQUIRE_MESSAGE(index.has_value(), (index.has_value() ? "" : index.error().message()));
  return *index;
}

std::string file_of(const std::string&) { return "shard"; }

}  // namespace

BOOST_AUTO_TEST_SUITE(weight_plan)

BOOST_AUTO_TEST_CASE(every_name_of_a_published_e2b_index_maps_to_an_offset_an_ignored_kv_weight_or_a_skipped_part) {
  const tg::model_config config = *tg::load_model_config(e2b);
  const tg::model_layout layout = tg::build_layout(config, tg::dtype::bfloat16);
  BOOST_TEST(layout.parameter_count == 4'628'569'379);  // the E2B text stack's published parameter count
  const tg::checkpoint_index index = e2b_index();
  std::vector<std::string> names;
  for (const auto& [name, shard] : index.weight_map) names.push_back(name);
  auto plan = tg::plan_weights(config, layout, names, file_of, "index");
  BOOST_REQUIRE_MESSAGE(plan.has_value(), (plan.has_value() ? "" : plan.error().message()));

  std::map<tg::tensor_role, int> roles;
  std::map<std::string, int> prefixes;
  for (const tg::planned_tensor& p : plan->tensors) {
    ++roles[p.role];
    if (p.role == tg::tensor_role::non_text) ++prefixes[std::string(p.prefix)];
    if (p.role == tg::tensor_role::text) {
      const tg::tensor_entry& e = layout.tensors[p.layout_index];
      BOOST_TEST(p.name == "model.language_model." + e.name);
    }
    if (p.role == tg::tensor_role::unused_kv) {
      const int layer = std::stoi(p.name.substr(std::string("model.language_model.layers.").size()));
      BOOST_TEST(layer >= 15, p.name);  // E2B shares K/V from layer 15 on
    }
  }
  BOOST_TEST(roles[tg::tensor_role::text] == 540);  // the "540-key" text stack
  BOOST_TEST(roles[tg::tensor_role::unused_kv] == 60);  // 20 shared layers x k_proj, v_proj, k_norm
  BOOST_TEST(roles[tg::tensor_role::tied_head] == 0);
  BOOST_TEST(prefixes["model.vision_tower."] == 658);
  BOOST_TEST(prefixes["model.audio_tower."] == 751);
  BOOST_TEST(prefixes["model.embed_vision."] == 1);
  BOOST_TEST(prefixes["model.embed_audio."] == 1);
  for (std::size_t i = 0; i < layout.tensors.size(); ++i) BOOST_TEST(plan->layout_source[i] < plan->tensors.size());

  // Offsets: the embedding first, then the per-layer table after its V x H elements.
  BOOST_TEST(layout.find("embed_tokens.weight")->offset_elements == 0);
  BOOST_TEST(layout.find("embed_tokens_per_layer.weight")->offset_elements == 262144LL * 1536);
  BOOST_TEST(layout.find("embed_tokens_per_layer.weight")->elements() == 262144LL * 35 * 256);  // > 2^31
  BOOST_TEST(!layout.find("layers.15.self_attn.k_proj.weight"));
  BOOST_TEST(layout.find("layers.15.mlp.up_proj.weight")->shape == (std::vector<std::int64_t>{12288, 1536}));
}

BOOST_AUTO_TEST_CASE(a_text_only_file_names_its_tensors_under_model_and_has_no_skipped_parts) {
  tg::model_config config = *tg::load_model_config(std::filesystem::path(TANDEM_SOURCE_DIR) / "configs/models/tiny-dense");
  const tg::model_layout layout = tg::build_layout(config, tg::dtype::float32);
  std::vector<std::string> names;
  for (const auto& e : layout.tensors) names.push_back("model." + e.name);
  names.push_back("lm_head.weight");
  auto plan = tg::plan_weights(config, layout, names, file_of, "index");
  BOOST_REQUIRE(plan.has_value());
  BOOST_TEST(plan->tied_head.has_value());
  names.push_back("model.embed_vision.embedding_projection.weight");
  auto refused = tg::plan_weights(config, layout, names, file_of, "index");
  BOOST_REQUIRE(!refused.has_value());
  BOOST_TEST(refused.error().message() ==
             "shard: tensor 'model.embed_vision.embedding_projection.weight': inside the text stack, but the model's config "
             "has no such tensor");
}

BOOST_AUTO_TEST_CASE(an_untied_head_is_a_text_tensor_and_must_be_present) {
  tg::model_config config = *tg::load_model_config(std::filesystem::path(TANDEM_SOURCE_DIR) / "configs/models/tiny-dense");
  config.tie_word_embeddings = false;
  const tg::model_layout layout = tg::build_layout(config, tg::dtype::float32);
  std::vector<std::string> names;
  for (const auto& e : layout.tensors) names.push_back(tg::hf_full_name(config, e));
  auto plan = tg::plan_weights(config, layout, names, file_of, "index");
  BOOST_REQUIRE(plan.has_value());
  BOOST_TEST(!plan->tied_head.has_value());
  names.erase(std::find(names.begin(), names.end(), "lm_head.weight"));
  auto missing = tg::plan_weights(config, layout, names, file_of, "index");
  BOOST_REQUIRE(!missing.has_value());
  BOOST_TEST(missing.error().message() == "index: missing tensor 'lm_head.weight'");
}

BOOST_AUTO_TEST_SUITE_END()
