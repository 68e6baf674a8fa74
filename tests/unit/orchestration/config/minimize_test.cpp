// `validate --minimize`: keys set to exactly what the recipe would inherit.
#include <boost/test/unit_test.hpp>

#include "orchestration/config/minimize.h"
#include "support/temp_dir.h"

using namespace tandem::config;
using tandem::test::temp_dir;

BOOST_AUTO_TEST_SUITE(minimize_test)

BOOST_AUTO_TEST_CASE(a_key_repeating_the_parent_value_is_reported_with_both_places) {
  temp_dir d;
  d.write("parent.yaml", "grpo:\n  seed: 5\n  val_period: 3\n");
  const auto child = d.write("child.yaml", "defaults: parent.yaml\ngrpo:\n  seed: 5\n  val_period: 4\n");
  const auto m = find_redundant_keys(child);
  BOOST_TEST(m.errors.empty());
  BOOST_REQUIRE(m.redundant.size() == 1u);
  BOOST_TEST(m.redundant[0].to_string() ==
             child + ":3:3: grpo.seed: 5 repeats the value inherited from " + d.path().string() + "/parent.yaml:2:9");
}

BOOST_AUTO_TEST_CASE(a_key_repeating_the_schema_default_is_reported) {
  temp_dir d;
  const auto r = d.write("r.yaml", "policy:\n  optimizer:\n    beta1: 0.90\n    beta2: 0.95\n");
  const auto m = find_redundant_keys(r);
  BOOST_REQUIRE(m.redundant.size() == 1u);
  BOOST_TEST(m.redundant[0].to_string() == r + ":3:5: policy.optimizer.beta1: 0.9 repeats the value inherited from the schema default");
}

BOOST_AUTO_TEST_CASE(a_key_restoring_a_default_that_a_parent_changed_is_not_redundant) {
  temp_dir d;
  d.write("parent.yaml", "grpo:\n  seed: 5\n");
  const auto child = d.write("child.yaml", "defaults: parent.yaml\ngrpo:\n  seed: 42\n");
  BOOST_TEST(find_redundant_keys(child).redundant.empty());
}

BOOST_AUTO_TEST_CASE(an_unreadable_recipe_gives_errors_not_findings) {
  temp_dir d;
  const auto r = d.write("r.yaml", "grpo:\n  seed: [\n");
  const auto m = find_redundant_keys(r);
  BOOST_TEST(m.redundant.empty());
  BOOST_TEST(m.errors.size() == 1u);
}

BOOST_AUTO_TEST_SUITE_END()
