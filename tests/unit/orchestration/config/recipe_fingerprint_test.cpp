// What a resume must keep (orchestration/config/recipe_fingerprint.h): the run's length, logging,
// checkpointing and placement may change, every other key may not; the fingerprint follows the
// kept values only; the differences are listed key by key, saying both values.
#include "orchestration/config/recipe_fingerprint.h"

#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include "orchestration/config/resolve.h"

namespace tc = tandem::config;

namespace {

tc::resolved_recipe resolved(const std::vector<std::string>& overrides) {
  auto r = tc::resolve_recipe(std::string(TANDEM_SOURCE_DIR) + "/configs/recipes/tiny-gemma4-cpu.yaml", overrides);
  BOOST_TEST_REQUIRE(r.errors.empty(), tc::to_string(r.errors));
  return *r.recipe;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(recipe_fingerprint_test)

BOOST_AUTO_TEST_CASE(the_runs_length_logging_checkpointing_and_placement_may_change_across_a_resume_and_nothing_else) {
  for (const char* key : {"grpo.max_num_steps", "grpo.max_num_epochs", "logger.log_dir", "logger.tensorboard_enabled",
                          "checkpointing.save_period", "checkpointing.keep_top_k", "checkpointing.metric_name",
                          "checkpointing.higher_is_better", "checkpointing.checkpoint_dir", "cluster.gpus_per_node",
                          "cluster.num_nodes", "cluster.controller_port", "runtime.heartbeat_timeout_ms",
                          "policy.generation.colocated.resources.gpus_per_node"})
    BOOST_TEST(tc::changeable_across_resume(key), key);
  for (const char* key : {"grpo.seed", "grpo.num_prompts_per_step", "policy.optimizer.lr", "policy.model_name",
                          "checkpointing.save_optimizer", "data.shuffle", "policy.generation.temperature", "sft.max_num_steps"})
    BOOST_TEST(!tc::changeable_across_resume(key), key);
}

BOOST_AUTO_TEST_CASE(the_fingerprint_changes_with_a_kept_key_and_not_with_a_changeable_one) {
  const auto base = tc::resume_values(resolved({}));
  BOOST_TEST(tc::recipe_fingerprint(base).size() == 16u);
  BOOST_TEST(tc::recipe_fingerprint(base) == tc::recipe_fingerprint(tc::resume_values(resolved({"grpo.max_num_steps=7", "cluster.gpus_per_node=1"}))));
  BOOST_TEST(tc::recipe_fingerprint(base) != tc::recipe_fingerprint(tc::resume_values(resolved({"grpo.seed=7"}))));
  BOOST_TEST(base.count("grpo.max_num_steps") == 0u);
  BOOST_TEST(base.at("grpo.seed") == "42");
}

BOOST_AUTO_TEST_CASE(the_differing_keys_are_listed_in_key_order_with_both_values) {
  const auto saved = tc::resume_values(resolved({}));
  const auto now = tc::resume_values(resolved({"grpo.seed=7", "policy.optimizer.lr=0.01"}));
  const std::vector<std::string> expected = {"grpo.seed: 42 in the checkpoint, 7 now",
                                             "policy.optimizer.lr: 0.05 in the checkpoint, 0.01 now"};
  BOOST_TEST(tc::differing_keys(saved, now) == expected, boost::test_tools::per_element());
  auto fewer = saved;
  fewer.erase("grpo.seed");
  fewer.emplace("grpo.retired_key", "1");
  const std::vector<std::string> one_sided = {"grpo.retired_key: 1 in the checkpoint, not in this build's recipes",
                                              "grpo.seed: 42 now, not in the checkpoint"};
  BOOST_TEST(tc::differing_keys(fewer, saved) == one_sided, boost::test_tools::per_element());
  BOOST_TEST(tc::differing_keys(saved, saved).empty());
}

BOOST_AUTO_TEST_SUITE_END()
