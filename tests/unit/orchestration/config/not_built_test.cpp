// Settings this build cannot run yet: located where they are set (file:line:column, an override,
// or the recipe itself for a default), listed as notes by validate; data files checked by run only.
#include <boost/test/unit_test.hpp>

#include "orchestration/config/not_built.h"
#include "orchestration/config/resolve.h"
#include "support/temp_dir.h"

using namespace tandem::config;
using tandem::test::temp_dir;

BOOST_AUTO_TEST_SUITE(not_built_test)

BOOST_AUTO_TEST_CASE(a_not_built_setting_is_located_where_the_recipe_sets_it_and_a_parents_where_the_parent_does) {
  temp_dir d;
  d.write("parent.yaml", "policy:\n  offload_optimizer_for_logprob: true\n");
  const auto child = d.write("child.yaml",
                             "defaults: parent.yaml\npolicy:\n  model_name: tiny-all\n  context_parallel_size: 2\n"
                             "runtime:\n  engine: fake\ncluster:\n  backend: cpu\n");
  const resolution r = resolve_recipe(child);
  BOOST_TEST_REQUIRE(r.errors.empty(), to_string(r.errors));
  BOOST_TEST(to_notes(unbuilt_settings(*r.recipe)) ==
             d.path().string() + "/parent.yaml:2:34: note: policy.offload_optimizer_for_logprob: true: offloading the "
                                     "optimizer state for the logprob pass is not built yet\n" +
                 child + ":4:26: note: policy.context_parallel_size: 2: context parallelism is not built yet\n");
}

BOOST_AUTO_TEST_CASE(a_default_that_asks_for_something_not_built_names_the_recipe_and_says_it_is_the_default) {
  temp_dir d;
  const auto r = d.write("r.yaml", "policy:\n  model_name: tiny-all\n");
  const resolution res = resolve_recipe(r);
  BOOST_TEST_REQUIRE(res.errors.empty(), to_string(res.errors));
  const config_errors found = unbuilt_settings(*res.recipe);
  BOOST_TEST_REQUIRE(found.size() == 1u, to_notes(found));
  BOOST_TEST(found[0].to_string() == r + ": error: cluster.backend: cuda (the default): on CUDA the RL loop runs on one device "
                                         "(cluster.num_nodes 1, cluster.gpus_per_node 1, policy and rollout colocated); refits "
                                         "and gradients between devices over NCCL are not built yet",
             found[0].to_string());
}

BOOST_AUTO_TEST_CASE(the_gemma4_engines_run_on_the_cpu_and_on_one_cuda_device_and_the_fake_engines_on_the_cpu_only) {
  temp_dir d;
  const auto r = d.write("r.yaml", "policy:\n  model_name: tiny-all\ncluster:\n  backend: cpu\n");
  const resolution cpu = resolve_recipe(r);
  BOOST_TEST_REQUIRE(cpu.errors.empty(), to_string(cpu.errors));
  BOOST_TEST(to_notes(unbuilt_settings(*cpu.recipe)) == "");  // runtime.engine: gemma4, the default, runs on the CPU
  const resolution one_gpu = resolve_recipe(r, {"cluster.backend=cuda", "cluster.gpus_per_node=1"});
  BOOST_TEST_REQUIRE(one_gpu.errors.empty(), to_string(one_gpu.errors));
  BOOST_TEST(to_notes(unbuilt_settings(*one_gpu.recipe)) == "");
  const resolution fake = resolve_recipe(r, {"cluster.backend=cuda", "cluster.gpus_per_node=1", "runtime.engine=fake"});
  BOOST_TEST_REQUIRE(fake.errors.empty(), to_string(fake.errors));
  BOOST_TEST(to_notes(unbuilt_settings(*fake.recipe)) ==
             "override 3 'runtime.engine=fake': note: runtime.engine: fake: the fake engines run on cluster.backend: cpu only\n");
  const resolution two_gpus = resolve_recipe(r, {"cluster.backend=cuda", "cluster.gpus_per_node=2"});
  BOOST_TEST_REQUIRE(two_gpus.errors.empty(), to_string(two_gpus.errors));
  BOOST_TEST(to_notes(unbuilt_settings(*two_gpus.recipe)) ==
             "override 1 'cluster.backend=cuda': note: cluster.backend: cuda: on CUDA the RL loop runs on one device "
             "(cluster.num_nodes 1, cluster.gpus_per_node 1, policy and rollout colocated); refits and gradients between "
             "devices over NCCL are not built yet\n");
}

BOOST_AUTO_TEST_CASE(an_override_that_turns_on_something_not_built_is_named_as_the_override) {
  temp_dir d;
  const auto r = d.write("r.yaml", "policy:\n  model_name: tiny-all\nruntime:\n  engine: fake\ncluster:\n  backend: cpu\n");
  const resolution res = resolve_recipe(r, {"checkpointing.save_optimizer=false"});
  BOOST_TEST_REQUIRE(res.errors.empty(), to_string(res.errors));
  BOOST_TEST(to_notes(unbuilt_settings(*res.recipe)) ==
             "override 1 'checkpointing.save_optimizer=false': note: checkpointing.save_optimizer: false: checkpoints "
             "without the optimizer state are not built: every checkpoint resumes exactly\n");
}

BOOST_AUTO_TEST_CASE(settings_the_fake_engines_ignore_are_noted_only_for_a_fake_run_and_only_where_set) {
  temp_dir d;
  const auto r = d.write("r.yaml", "policy:\n  model_name: tiny-all\n  recompute_granularity: full\nruntime:\n  engine: fake\n");
  const resolution res = resolve_recipe(r);
  BOOST_TEST_REQUIRE(res.errors.empty(), to_string(res.errors));
  BOOST_TEST(to_notes(engine_ignored_settings(*res.recipe)) ==
             r + ":3:26: note: policy.recompute_granularity: full configures the Gemma 4 engines; runtime.engine: fake ignores it\n");
  const resolution real = resolve_recipe(r, {"runtime.engine=gemma4"});
  BOOST_TEST(engine_ignored_settings(*real.recipe).empty());
}

BOOST_AUTO_TEST_CASE(settings_only_the_fake_engines_read_are_noted_for_a_gemma4_run_and_only_where_set) {
  temp_dir d;
  const auto r = d.write("r.yaml", "policy:\n  model_name: tiny-all\nruntime:\n  fake_weight_mb: 64\n");
  const resolution res = resolve_recipe(r);
  BOOST_TEST_REQUIRE(res.errors.empty(), to_string(res.errors));
  BOOST_TEST(to_notes(engine_ignored_settings(*res.recipe)) ==
             r + ":4:19: note: runtime.fake_weight_mb: 64 configures the fake engines; runtime.engine: gemma4 ignores it\n");
  const resolution fake = resolve_recipe(r, {"runtime.engine=fake"});
  BOOST_TEST(engine_ignored_settings(*fake.recipe).empty());
  const auto unset = d.write("unset.yaml", "policy:\n  model_name: tiny-all\n");
  BOOST_TEST(engine_ignored_settings(*resolve_recipe(unset).recipe).empty());  // a default is never noted
}

BOOST_AUTO_TEST_CASE(a_dataset_file_that_does_not_exist_is_named_with_its_key_and_an_existing_one_passes) {
  temp_dir d;
  const auto present = d.write("prompts.jsonl", "{}\n");
  const auto r = d.write("r.yaml", "policy:\n  model_name: tiny-all\ndata:\n  train_dataset: " + present +
                                       "\n  validation_dataset: " + d.path().string() + "/missing.jsonl\n");
  const resolution res = resolve_recipe(r);
  BOOST_TEST_REQUIRE(res.errors.empty(), to_string(res.errors));
  BOOST_TEST(to_string(missing_data_files(*res.recipe)) ==
             r + ":5:23: error: data.validation_dataset: " + d.path().string() +
                 "/missing.jsonl: no such file (relative paths are from the directory tandem runs in)\n");
}

BOOST_AUTO_TEST_SUITE_END()
