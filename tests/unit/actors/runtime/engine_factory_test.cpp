// The engine factory builds what the recipe's engine choices name: the fake engines over the fake
// model that runtime.fake_weight_mb, grpo.seed and the sequence length set, the fake task's prompts
// and parity reward; and it refuses, naming the key, what is not built (gemma4, a dataset, the
// arithmetic and math environments).
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include "actors/runtime/engine_factory.hpp"
#include "gpu/engine/fake/fake_generate_engine.h"
#include "gpu/engine/fake/fake_task.h"
#include "gpu/engine/fake/fake_train_engine.h"
#include "orchestration/config/resolve.h"
#include "support/small_recipe.h"

namespace tc = tandem::config;
namespace tg = tandem::gpu;

namespace {

/// The small recipe of the unit tests with `overrides`.
tc::recipe_config recipe_of(const std::vector<std::string>& overrides) { return tandem::test::small_recipe(overrides); }

/// The refusal of a failed result, or "" when it holds a value.
template <class T>
std::string refusal(const tg::result<T>& r) {
  return r ? std::string() : r.error().message();
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

BOOST_AUTO_TEST_SUITE(engine_factory_test)

BOOST_AUTO_TEST_CASE(the_fake_model_follows_fake_weight_mb_the_seed_and_the_sequence_length) {
  const auto recipe = recipe_of({"runtime.fake_weight_mb=5", "grpo.seed=9", "policy.max_total_sequence_length=77"});
  auto engines = tandem::make_engines(recipe, true, true, nullptr);
  BOOST_TEST_REQUIRE(bool(engines), refusal(engines));
  const auto* trainer = dynamic_cast<const tg::fake_train_engine*>(engines->train.get());
  const auto* generator = dynamic_cast<const tg::fake_generate_engine*>(engines->generate.get());
  BOOST_TEST_REQUIRE(trainer != nullptr);
  BOOST_TEST_REQUIRE(generator != nullptr);
  const tg::fake_model_options& f = trainer->options();
  BOOST_TEST(f.weight_bytes == 5 * (1 << 20));
  BOOST_TEST(f.seed == 9u);
  BOOST_TEST(f.max_sequence_length == 77);
  // Trainer and generator of one run share one fake model, so the generator's layout is the policy's.
  BOOST_TEST(generator->options().model.weight_bytes == f.weight_bytes);
  BOOST_TEST(generator->options().model.seed == f.seed);
  BOOST_TEST(generator->options().model.vocab == f.vocab);
  BOOST_TEST((engines->rollout_layout == trainer->manifest()));
  BOOST_TEST(engines->weights_digest() == trainer->weight_hash());
}

BOOST_AUTO_TEST_CASE(a_member_gets_only_the_engines_of_the_actors_it_hosts) {
  const auto recipe = recipe_of({"runtime.fake_weight_mb=1"});
  auto rollout_only = tandem::make_engines(recipe, false, true, nullptr);
  BOOST_TEST_REQUIRE(bool(rollout_only), refusal(rollout_only));
  BOOST_TEST(!rollout_only->train);
  BOOST_TEST(bool(rollout_only->generate));
  BOOST_TEST(rollout_only->weights_digest() == 0u);
  auto policy_only = tandem::make_engines(recipe, true, false, nullptr);
  BOOST_TEST_REQUIRE(bool(policy_only), refusal(policy_only));
  BOOST_TEST(bool(policy_only->train));
  BOOST_TEST(!policy_only->generate);
}

BOOST_AUTO_TEST_CASE(runtime_engine_gemma4_is_refused_until_its_engines_exist) {
  const auto engines = tandem::make_engines(recipe_of({"runtime.engine=gemma4"}), true, true, nullptr);
  BOOST_TEST_REQUIRE(!engines);
  BOOST_TEST((engines.error().code() == tg::status_code::unsupported));
  BOOST_TEST(contains(engines.error().message(), "runtime.engine: gemma4:"), engines.error().message());
  const auto prompts = tandem::training_prompts(recipe_of({"runtime.engine=gemma4"}));
  BOOST_TEST_REQUIRE(!prompts);
  BOOST_TEST(contains(prompts.error().message(), "runtime.engine gemma4 has no prompts of its own"),
             prompts.error().message());
}

BOOST_AUTO_TEST_CASE(the_fake_engines_train_on_the_fake_tasks_prompts_of_the_seed) {
  const auto prompts = tandem::training_prompts(recipe_of({"grpo.seed=9"}));
  BOOST_TEST_REQUIRE(bool(prompts), refusal(prompts));
  BOOST_TEST((*prompts == tg::fake_prompts(9, 64, 64)));
  const auto other = tandem::training_prompts(recipe_of({"grpo.seed=10"}));
  BOOST_TEST_REQUIRE(bool(other), refusal(other));
  BOOST_TEST((*other != *prompts));
}

BOOST_AUTO_TEST_CASE(a_dataset_path_is_refused_as_not_built_naming_the_key_and_the_path) {
  const auto prompts = tandem::training_prompts(recipe_of({"data.train_dataset=prompts.jsonl"}));
  BOOST_TEST_REQUIRE(!prompts);
  BOOST_TEST((prompts.error().code() == tg::status_code::unsupported));
  BOOST_TEST(prompts.error().message() ==
             "data.train_dataset: prompts.jsonl: datasets are not built yet (null: the prompts of runtime.engine: fake)");
}

BOOST_AUTO_TEST_CASE(env_parity_scores_the_fake_tasks_parity_reward_of_the_generated_tokens) {
  const auto reward = tandem::reward_for(recipe_of({"env.name=parity"}));
  BOOST_TEST_REQUIRE(bool(reward), refusal(reward));
  tandem::trajectory t;
  t.prompt = {2};  // the prompt does not count
  BOOST_TEST((*reward)(t).reward == 0.0);
  t.tokens = {3, 8};
  BOOST_TEST((*reward)(t).reward == 1.0);
  BOOST_TEST((*reward)(t).done);
  t.tokens = {8, 3};
  BOOST_TEST((*reward)(t).reward == 0.0);
  BOOST_TEST(bool(tandem::reward_for(recipe_of({}))));  // parity is the default
}

BOOST_AUTO_TEST_CASE(env_math_and_arithmetic_are_refused_as_not_built_naming_the_key) {
  for (const std::string name : {"math", "arithmetic"}) {
    const auto reward = tandem::reward_for(recipe_of({"env.name=" + name}));
    BOOST_TEST_REQUIRE(!reward, name);
    BOOST_TEST((reward.error().code() == tg::status_code::unsupported));
    BOOST_TEST(reward.error().message() == "env.name: " + name +
                                               ": only the parity environment is built (an even last generated token "
                                               "scores 1); arithmetic and math are not built yet");
  }
}

BOOST_AUTO_TEST_SUITE_END()
