// Recipe resolution: inheritance order, key-by-key overriding, overrides, origins, typed values.
#include <boost/test/unit_test.hpp>

#include "orchestration/config/render.h"
#include "orchestration/config/resolve.h"
#include "support/temp_dir.h"

using namespace tandem::config;
using tandem::test::temp_dir;

namespace {

constexpr const char* base = R"(grpo:
  num_prompts_per_step: 4
  num_generations_per_prompt: 4
  seed: 1
policy:
  model_name: tiny-all
  train_global_batch_size: 8
  max_total_sequence_length: 64
  generation:
    max_new_tokens: 32
    temperature: 0.7
data:
  max_input_seq_length: 32
cluster:
  backend: cpu
  gpus_per_node: 2
)";

resolved_recipe resolve_ok(const std::string& path, const std::vector<std::string>& overrides = {}) {
  resolution r = resolve_recipe(path, overrides);
  BOOST_REQUIRE_MESSAGE(r.recipe.has_value(), to_string(r.errors));
  return *r.recipe;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(resolve_test)

BOOST_AUTO_TEST_CASE(a_child_overrides_its_parent_key_by_key_and_keeps_the_rest) {
  temp_dir d;
  d.write("base.yaml", base);
  const auto child = d.write("child.yaml", "defaults: base.yaml\npolicy:\n  generation:\n    temperature: 0.9\n");
  const auto r = resolve_ok(child);
  BOOST_TEST(r.config.policy.generation.temperature == 0.9);
  BOOST_TEST(r.config.policy.generation.max_new_tokens == 32);  // sibling inherited
  BOOST_TEST(r.config.grpo.seed == 1);
  BOOST_TEST(r.origin("policy.generation.temperature").to_string() == child + ":4:18");
  BOOST_TEST(r.origin("grpo.seed").to_string() == d.path().string() + "/base.yaml:4:9");
  BOOST_TEST(r.origin("grpo.max_num_steps").is_default());
  BOOST_TEST(r.files.size() == 2u);
}

BOOST_AUTO_TEST_CASE(later_parents_in_a_defaults_list_override_earlier_ones) {
  temp_dir d;
  d.write("base.yaml", base);
  d.write("a.yaml", "grpo:\n  seed: 10\n  val_at_end: false\n");
  d.write("b.yaml", "grpo:\n  seed: 20\n");
  const auto child = d.write("child.yaml", "defaults: [base.yaml, a.yaml, b.yaml]\n");
  BOOST_TEST(resolve_ok(child).config.grpo.seed == 20);
}

BOOST_AUTO_TEST_CASE(a_shared_grandparent_is_not_a_cycle) {
  temp_dir d;
  d.write("base.yaml", base);
  d.write("left.yaml", "defaults: base.yaml\ngrpo:\n  seed: 5\n");
  d.write("right.yaml", "defaults: base.yaml\ngrpo:\n  val_at_end: false\n");
  const auto child = d.write("child.yaml", "defaults:\n  - left.yaml\n  - right.yaml\n");
  // right.yaml re-applies base.yaml after left.yaml, as merging each resolved parent in order does.
  BOOST_TEST(resolve_ok(child).config.grpo.seed == 1);
}

BOOST_AUTO_TEST_CASE(parents_are_found_relative_to_the_file_that_names_them) {
  temp_dir d;
  d.write("shared/base.yaml", base);
  d.write("shared/mid.yaml", "defaults: base.yaml\n");
  const auto child = d.write("runs/child.yaml", "defaults: ../shared/mid.yaml\n");
  const auto r = resolve_ok(child);
  BOOST_TEST(r.config.policy.model_name == "tiny-all");
  BOOST_TEST(r.files.front() == d.path().string() + "/shared/base.yaml");
}

BOOST_AUTO_TEST_CASE(overrides_apply_last_and_are_named_as_their_origin) {
  temp_dir d;
  const auto recipe = d.write("r.yaml", base);
  const auto r = resolve_ok(recipe, {"grpo.seed=7", "policy.generation={temperature: 0.5, top_k: 20}"});
  BOOST_TEST(r.config.grpo.seed == 7);
  BOOST_TEST(r.config.policy.generation.temperature == 0.5);
  BOOST_TEST(r.config.policy.generation.top_k.value() == 20);
  BOOST_TEST(r.origin("grpo.seed").to_string() == "override 1 'grpo.seed=7'");
}

BOOST_AUTO_TEST_CASE(an_override_naming_a_section_needs_a_mapping) {
  temp_dir d;
  const auto recipe = d.write("r.yaml", base);
  const resolution r = resolve_recipe(recipe, {"policy.generation=3"});
  BOOST_TEST(to_string(r.errors) ==
             "override 1 'policy.generation=3': error: policy.generation: expected a mapping of keys, got '3'\n");
}

BOOST_AUTO_TEST_CASE(an_override_setting_a_section_to_null_or_nothing_is_refused_instead_of_changing_nothing) {
  temp_dir d;
  const auto recipe = d.write("r.yaml", base);
  for (const std::string value : {"null", "", "~", "{}"}) {
    const resolution r = resolve_recipe(recipe, {"policy=" + value});
    BOOST_TEST(to_string(r.errors) == "override 1 'policy=" + value +
                                          "': error: policy: is a section: an override sets one key (policy.KEY=VALUE); "
                                          "an empty value would change nothing\n");
  }
  const resolution nested = resolve_recipe(recipe, {"policy.generation=null"});
  BOOST_TEST(!nested.errors.empty());
}

BOOST_AUTO_TEST_CASE(an_override_without_an_equals_sign_is_refused) {
  temp_dir d;
  const auto recipe = d.write("r.yaml", base);
  const resolution r = resolve_recipe(recipe, {"=3"});
  BOOST_TEST(to_string(r.errors) == "override 1 '=3': error: expected key.path=value\n");
}

BOOST_AUTO_TEST_CASE(values_land_in_typed_fields_including_enums_and_nullables) {
  temp_dir d;
  d.write("base.yaml", base);
  const auto child = d.write("c.yaml", R"(defaults: base.yaml
policy:
  recompute_granularity: selective
  max_grad_norm: null
  optimizer:
    second_moment_dtype: bfloat16
  generation:
    stop_token_ids: [1, 106]
loss_fn:
  truncated_importance_sampling_type: icepop
  truncated_importance_sampling_ratio: 2
  use_importance_sampling_correction: true
)");
  const auto c = resolve_ok(child).config;
  BOOST_TEST((c.policy.recompute == recompute_granularity::selective));
  BOOST_TEST(!c.policy.max_grad_norm.has_value());
  BOOST_TEST((c.policy.optimizer.second_moment_dtype == state_dtype::bfloat16));
  BOOST_TEST((c.policy.optimizer.first_moment_dtype == state_dtype::float32));
  BOOST_TEST((c.policy.generation.stop_token_ids.value() == std::vector<std::int64_t>{1, 106}));
  BOOST_TEST((c.loss_fn.truncated_importance_sampling_type == importance_sampling_type::icepop));
  BOOST_TEST(c.loss_fn.truncated_importance_sampling_ratio.value() == 2.0);  // integer text, real key
}

BOOST_AUTO_TEST_CASE(every_value_written_is_checked_even_when_a_child_overrides_it) {
  temp_dir d;
  d.write("base.yaml", std::string(base) + "env:\n  num_workers: 0\n");
  const auto child = d.write("c.yaml", "defaults: base.yaml\nenv:\n  num_workers: 2\n");
  const resolution r = resolve_recipe(child);
  BOOST_TEST(to_string(r.errors) == d.path().string() + "/base.yaml:18:16: error: env.num_workers: must be >= 1, got 0\n");
}

BOOST_AUTO_TEST_CASE(an_empty_section_is_accepted_as_no_keys) {
  temp_dir d;
  d.write("base.yaml", base);
  const auto child = d.write("c.yaml", "defaults: base.yaml\nlogger:\n");
  BOOST_TEST(resolve_ok(child).config.logger.log_dir == "logs");
}

BOOST_AUTO_TEST_CASE(the_rendered_configuration_resolves_to_the_same_values) {
  temp_dir d;
  d.write("base.yaml", base);
  const auto child = d.write("c.yaml", "defaults: base.yaml\ncheckpointing:\n  checkpoint_dir: 'out dir: #1'\n");
  const auto first = resolve_ok(child, {"grpo.seed=9"});
  const auto again = resolve_ok(d.write("rendered.yaml", render_resolved(first)));
  BOOST_TEST(again.values.size() == first.values.size());
  for (const auto& [key, v] : first.values) BOOST_TEST((again.values.at(key).value == v.value), key);
}

BOOST_AUTO_TEST_SUITE_END()
