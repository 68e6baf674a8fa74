// The engine factory builds what the recipe's engine choices name: the fake engines over the fake
// model that runtime.fake_weight_mb, grpo.seed and the sequence length set; the Gemma 4 CPU
// engines over the checkpoint of policy.model_name with the generator's options and KV budget
// from the recipe; the parity task's prompts over the engines' vocabulary and its reward; and it
// refuses, naming the key, what is not built (gemma4 on cuda) or cannot work (a name that is no
// directory, a checkpoint without weights). Datasets and text tasks: run_task_test.cpp.
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "actors/runtime/engine_factory.hpp"
#include "actors/runtime/recipe_settings.hpp"
#include "gpu/core/device_query.h"
#include "gpu/engine/gemma4_generate_engine.h"
#include "gpu/engine/gemma4_train_engine.h"
#include "gpu/engine/fake/fake_generate_engine.h"
#include "gpu/engine/fake/fake_train_engine.h"
#include "gpu/engine/parity_task.h"
#include "gpu/model/kv_cache.h"
#include "orchestration/config/resolve.h"
#include "support/small_recipe.h"
#include "support/temp_dir.h"

namespace fs = std::filesystem;
namespace tc = tandem::config;
namespace tg = tandem::gpu;

namespace {

/// The small recipe of the unit tests with `overrides`.
tc::recipe_config recipe_of(const std::vector<std::string>& overrides) { return tandem::test::small_recipe(overrides); }

/// The all-features test checkpoint (config.json and model.safetensors).
const std::string checkpoint = std::string(TANDEM_SOURCE_DIR) + "/tests/data/reference/all_features";

/// The small recipe on the Gemma 4 engines over `model` (default: the all-features checkpoint).
tc::recipe_config gemma4_recipe(std::vector<std::string> overrides, const std::string& model = checkpoint) {
  overrides.insert(overrides.begin(), {"runtime.engine=gemma4", "policy.model_name=" + model});
  return recipe_of(overrides);
}

/// The refusal of a failed result, or "" when it holds a value.
template <class T>
std::string refusal(const tg::result<T>& r) {
  return r ? std::string() : r.error().message();
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

/// `x` as an override value that reads back as the same double.
std::string exact(double x) {
  std::ostringstream s;
  s.precision(17);
  s << x;
  return s.str();
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// Runs `requests` on `engine` to the end; the finished sequences by id.
std::vector<tg::finished_sequence> generate(tg::generate_engine& engine, const std::vector<tg::generation_request>& requests) {
  std::vector<tg::finished_sequence> done(requests.size());
  BOOST_TEST_REQUIRE(bool(engine.submit(requests)));
  for (;;) {
    auto left = engine.step();
    BOOST_TEST_REQUIRE(bool(left), refusal(left));
    for (auto& f : engine.collect()) done[f.id] = std::move(f);
    if (*left == 0) return done;
  }
}

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
  for (const auto& recipe : {recipe_of({"runtime.fake_weight_mb=1"}), gemma4_recipe({})}) {
    BOOST_TEST_CONTEXT((recipe.runtime.engine == tc::engine_kind::fake ? "fake" : "gemma4")) {
      auto rollout_only = tandem::make_engines(recipe, false, true, nullptr);
      BOOST_TEST_REQUIRE(bool(rollout_only), refusal(rollout_only));
      BOOST_TEST(!rollout_only->train);
      BOOST_TEST(bool(rollout_only->generate));
      BOOST_TEST(!rollout_only->generate->shares_weights());
      BOOST_TEST(rollout_only->weights_digest() == 0u);
      auto policy_only = tandem::make_engines(recipe, true, false, nullptr);
      BOOST_TEST_REQUIRE(bool(policy_only), refusal(policy_only));
      BOOST_TEST(bool(policy_only->train));
      BOOST_TEST(!policy_only->generate);
    }
  }
}

BOOST_AUTO_TEST_CASE(runtime_engine_gemma4_builds_the_cpu_engines_over_the_checkpoint_that_policy_model_name_names) {
  const auto recipe = gemma4_recipe({"policy.generation.stop_token_ids=[]"});
  auto engines = tandem::make_engines(recipe, true, true, nullptr);
  BOOST_TEST_REQUIRE(bool(engines), refusal(engines));
  const auto* trainer = dynamic_cast<const tg::gemma4_train_engine*>(engines->train.get());
  auto* generator = dynamic_cast<tg::gemma4_generate_engine*>(engines->generate.get());
  BOOST_TEST_REQUIRE(trainer != nullptr);
  BOOST_TEST_REQUIRE(generator != nullptr);
  const auto config = tg::load_model_config(checkpoint);
  BOOST_TEST_REQUIRE(bool(config));
  BOOST_TEST((trainer->config() == *config));
  BOOST_TEST((generator->config() == *config));
  // Colocated (the default): the generator reads the trainer's weights in place, so a trained step
  // is what the next generation sees, with no bytes moved; the layouts are one.
  BOOST_TEST(generator->shares_weights());
  BOOST_TEST((engines->rollout_layout == trainer->manifest()));
  BOOST_TEST(engines->weights_digest() == trainer->weights_digest());
  BOOST_TEST(generator->weights_digest() == trainer->weights_digest());
  // The generator's limits are the recipe's (small_recipe: 32 tokens in all, 256 sequences).
  BOOST_TEST(!bool(generator->submit(std::vector<tg::generation_request>{{1, {5, 6, 7}, {}, {}, 30, {}}})));
  BOOST_TEST(bool(generator->submit(std::vector<tg::generation_request>{{1, {5, 6, 7}, {}, {}, 29, {}}})));
  // A dedicated rollout member loads its own copy of the same weights.
  auto rollout_only = tandem::make_engines(gemma4_recipe({"policy.generation.colocated.enabled=false",
                                                           "policy.generation.colocated.resources.gpus_per_node=1",
                                                           "cluster.gpus_per_node=2", "policy.generation.stop_token_ids=[]"}),
                                           false, true, nullptr);
  BOOST_TEST_REQUIRE(bool(rollout_only), refusal(rollout_only));
  const auto* own = dynamic_cast<const tg::gemma4_generate_engine*>(rollout_only->generate.get());
  BOOST_TEST_REQUIRE(own != nullptr);
  BOOST_TEST(!own->shares_weights());
  BOOST_TEST(own->weights_digest() == trainer->weights_digest());
  BOOST_TEST((rollout_only->rollout_layout == trainer->manifest()));
}

BOOST_AUTO_TEST_CASE(gemma4_on_cuda_without_the_members_device_is_refused_naming_the_device_and_what_the_process_sees) {
  auto recipe = gemma4_recipe({});
  recipe.cluster.backend = tc::compute_backend::cuda;
  const tg::backend_info b = tg::query_backend();
  const auto engines = tandem::make_engines(recipe, true, true, nullptr, static_cast<std::int64_t>(b.devices.size()));
  BOOST_TEST_REQUIRE(!engines);
  if (!b.cuda_built) {
    BOOST_TEST((engines.error().code() == tg::status_code::unsupported));
    BOOST_TEST(engines.error().message().find("this build of tandem has no CUDA backend") != std::string::npos,
               engines.error().message());
    return;
  }
  BOOST_TEST((engines.error().code() == tg::status_code::invalid_argument));
  const std::string prefix = "cluster.backend: cuda: this member is placed on device " + std::to_string(b.devices.size()) +
                             " of its node, but this process sees " + std::to_string(b.devices.size()) + " CUDA device";
  BOOST_TEST(engines.error().message().starts_with(prefix), engines.error().message());
  // The controller loads no weights: the parity prompts come from config.json on any backend.
  BOOST_TEST(bool(tandem::training_prompts(recipe)));
}

BOOST_AUTO_TEST_CASE(the_fake_engines_on_cuda_are_refused_as_not_built) {
  auto recipe = gemma4_recipe({});
  recipe.runtime.engine = tc::engine_kind::fake;
  recipe.cluster.backend = tc::compute_backend::cuda;
  const auto engines = tandem::make_engines(recipe, true, true, nullptr);
  BOOST_TEST_REQUIRE(!engines);
  BOOST_TEST((engines.error().code() == tg::status_code::unsupported));
  BOOST_TEST(engines.error().message() == "runtime.engine: fake: the fake engines run on cluster.backend: cpu only");
}

BOOST_AUTO_TEST_CASE(a_name_that_is_no_checkpoint_directory_is_refused_naming_policy_model_name) {
  const auto published = tandem::make_engines(gemma4_recipe({}, "google/gemma-4-E2B-it"), true, true, nullptr);
  BOOST_TEST_REQUIRE(!published);
  BOOST_TEST((published.error().code() == tg::status_code::invalid_argument));
  BOOST_TEST(published.error().message().starts_with("policy.model_name: google/gemma-4-E2B-it: no such directory; the "
                                                     "Gemma 4 engines load a local checkpoint directory"),
             published.error().message());
  BOOST_TEST(contains(refusal(tandem::training_prompts(gemma4_recipe({}, "google/gemma-4-E2B-it"))),
                      "policy.model_name: google/gemma-4-E2B-it: the parity prompts need the model's vocabulary: "));
  // A preset is a config.json alone: the controller can read its vocabulary, the engines have no weights.
  const std::string preset = std::string(TANDEM_SOURCE_DIR) + "/configs/models/tiny-all";
  const auto config_only = tandem::make_engines(gemma4_recipe({}, preset), false, true, nullptr);
  BOOST_TEST_REQUIRE(!config_only);
  BOOST_TEST(config_only.error().message() == "policy.model_name: " + preset +
                                                  " holds a config.json but no weights (model.safetensors, or an index "
                                                  "and its shards): runtime.engine gemma4 loads a checkpoint (a preset in "
                                                  "configs/models/ is a config only)");
  BOOST_TEST(refusal(tandem::open_policy_checkpoint(gemma4_recipe({}, preset))) == config_only.error().message());
  BOOST_TEST(bool(tandem::open_policy_checkpoint(gemma4_recipe({}))));
}

BOOST_AUTO_TEST_CASE(the_kv_cache_holds_max_num_sequences_full_length_sequences_within_what_gpu_memory_utilization_leaves) {
  auto source = tg::open_checkpoint(checkpoint, tg::dtype::float32);
  BOOST_TEST_REQUIRE(bool(source), refusal(source));
  const std::int64_t block = tg::kv_block_bytes(source->config, tg::dtype::float32, 16);
  BOOST_TEST_REQUIRE(block > 0);
  const auto settings = [&](const std::vector<std::string>& overrides, bool colocated) {
    return tandem::generate_settings(gemma4_recipe(overrides), *source, colocated);
  };
  // 32 tokens: 2 blocks of 16, plus a fork's and a prefix holder's, for each of max_num_sequences.
  for (const std::int64_t n : {1, 16, 256}) {
    BOOST_TEST_CONTEXT("max_num_sequences " << n) {
      const auto o = settings({"policy.generation.max_num_sequences=" + std::to_string(n), "policy.refit.bucket_mb=3"}, true);
      BOOST_TEST_REQUIRE(bool(o), refusal(o));
      BOOST_TEST(o->kv_cache_bytes == n * 4 * block);
      BOOST_TEST(o->max_num_sequences == n);
      BOOST_TEST(o->max_sequence_length == 32);
      BOOST_TEST(o->bucket_bytes == 3 << 20);
    }
  }
  // The memory plan's share caps it: the usable device memory less the weights and, colocated, the
  // trainer's gradients and AdamW moments (float32: 4 + 4 + 4 bytes per weight beside the shared
  // weights), or, dedicated, the live and the staged weights; and the generator's working memory
  // (the head's logits and the sampler's scratch of 256 rows, 4 + 4 bytes per logit on the CPU).
  const double weights = 4.0 * static_cast<double>(source->layout.total_elements);
  const double head = 256.0 * static_cast<double>(source->config.vocab_size) * 8.0;
  const double gib = 1024.0 * 1024.0 * 1024.0;
  for (const bool colocated : {true, false}) {
    BOOST_TEST_CONTEXT((colocated ? "colocated" : "dedicated")) {
      const double resident = (colocated ? 4.0 * weights : 2.0 * weights) + head;
      const double room = 10.0 * 4.0 * static_cast<double>(block);  // ten full-length sequences
      const std::string memory = "cluster.device_memory_gib=" + exact((resident + room) / 0.5 / gib);
      const auto capped = settings({"policy.generation.max_num_sequences=256", "policy.generation.gpu_memory_utilization=0.5", memory},
                                   colocated);
      BOOST_TEST_REQUIRE(bool(capped), refusal(capped));
      BOOST_TEST(capped->kv_cache_bytes < 256 * 4 * block);
      BOOST_TEST(capped->kv_cache_bytes >= 9 * 4 * block);
      BOOST_TEST(capped->kv_cache_bytes <= 11 * 4 * block);
      const auto o = tg::kv_cache_options_for(source->config, tg::dtype::float32, 16, capped->kv_cache_bytes);
      BOOST_TEST(o.full_blocks >= 36);
      // Too little for one sequence: refused naming the keys.
      const auto none = settings({"cluster.device_memory_gib=" + exact(resident / 0.5 / gib),
                                  "policy.generation.gpu_memory_utilization=0.5"},
                                 colocated);
      BOOST_TEST_REQUIRE(!none);
      BOOST_TEST(none.error().message().starts_with("policy.generation.gpu_memory_utilization: 0.5 of cluster.device_memory_gib "),
                 none.error().message());
      BOOST_TEST(contains(none.error().message(), "less than one sequence of policy.max_total_sequence_length (32 tokens: " +
                                                      std::to_string(4 * block) + " bytes)"),
                 none.error().message());
    }
  }
}

BOOST_AUTO_TEST_CASE(stop_token_ids_null_ends_gemma4_responses_at_the_models_eos_ids_and_a_list_replaces_them) {
  // A copy of the checkpoint whose config.json names most of the vocabulary as eos ids (10..199),
  // so nearly every response of 16 sampled tokens meets one.
  tandem::test::temp_dir dir;
  std::string config = slurp(fs::path(checkpoint) / "config.json");
  std::string ids = "[1";
  for (int id = 10; id < 200; ++id) ids += ", " + std::to_string(id);
  ids += "]";
  const std::string field = "\"eos_token_id\": 1";
  BOOST_TEST_REQUIRE(contains(config, field));
  config.replace(config.find(field), field.size(), "\"eos_token_id\": " + ids);
  dir.write("model/config.json", config);
  fs::copy_file(fs::path(checkpoint) / "model.safetensors", dir.path() / "model" / "model.safetensors");
  const std::string model = (dir.path() / "model").string();
  const auto eos = [](std::int32_t t) { return t == 1 || (t >= 10 && t < 200); };

  std::vector<tg::generation_request> requests;
  for (std::uint32_t i = 0; i < 16; ++i) requests.push_back({i, {5, 6, 7}, {1.0, 0, 1.0}, {3, 0, 0, i, 0, 0}, 16, {}});
  for (const bool null_list : {true, false}) {
    BOOST_TEST_CONTEXT((null_list ? "stop_token_ids: null" : "stop_token_ids: []")) {
      std::vector<std::string> overrides;
      if (!null_list) overrides.push_back("policy.generation.stop_token_ids=[]");
      auto engines = tandem::make_engines(gemma4_recipe(overrides, model), false, true, nullptr);
      BOOST_TEST_REQUIRE(bool(engines), refusal(engines));
      std::size_t stopped = 0;
      for (const auto& f : generate(*engines->generate, requests)) {
        BOOST_TEST_REQUIRE(!f.tokens.empty());
        for (std::size_t t = 0; t + 1 < f.tokens.size(); ++t)
          if (null_list) BOOST_TEST(!eos(f.tokens[t]), "request " << f.id << " went past eos id " << f.tokens[t]);
        if (f.reason == tg::finish_reason::stop_token) {
          ++stopped;
          BOOST_TEST(eos(f.tokens.back()));
        }
      }
      if (null_list) BOOST_TEST(stopped >= 12u);  // each token is an eos id with a chance of about 3 in 4
      else BOOST_TEST(stopped == 0u);             // an empty list: every response runs to max_new_tokens
    }
  }
}

BOOST_AUTO_TEST_CASE(gemma4_trains_on_parity_prompts_over_the_checkpoints_vocabulary_read_from_config_json_alone) {
  // The controller reads config.json only: a directory without weights gives the same prompts.
  tandem::test::temp_dir dir;
  dir.write("model/config.json", slurp(fs::path(checkpoint) / "config.json"));
  const auto prompts = tandem::training_prompts(gemma4_recipe({"grpo.seed=9"}, (dir.path() / "model").string()));
  BOOST_TEST_REQUIRE(bool(prompts), refusal(prompts));
  // vocab_size 256; pad 0, eos 1 and bos 2 stay out of the prompts.
  BOOST_TEST((*prompts == tg::parity_prompts(9, 64, 256, 3)));
  BOOST_TEST((*prompts == *tandem::training_prompts(gemma4_recipe({"grpo.seed=9"}))));
  std::set<std::int32_t> ids;
  for (const auto& p : *prompts) ids.insert(p.begin(), p.end());
  BOOST_TEST(*ids.begin() >= 3);
  BOOST_TEST(*ids.rbegin() < 256);
  BOOST_TEST(*ids.rbegin() >= 64);  // the checkpoint's vocabulary, not the fake model's 64 tokens
  const auto missing = tandem::training_prompts(gemma4_recipe({}, dir.path().string()));
  BOOST_TEST_REQUIRE(!missing);
  BOOST_TEST(missing.error().message().starts_with("policy.model_name: " + dir.path().string() +
                                                   ": the parity prompts need the model's vocabulary: "),
             missing.error().message());
}

BOOST_AUTO_TEST_CASE(the_fake_engines_train_on_the_parity_prompts_of_the_seed_over_their_vocabulary) {
  const auto prompts = tandem::training_prompts(recipe_of({"grpo.seed=9"}));
  BOOST_TEST_REQUIRE(bool(prompts), refusal(prompts));
  BOOST_TEST((*prompts == tg::parity_prompts(9, 64, 64)));
  const auto other = tandem::training_prompts(recipe_of({"grpo.seed=10"}));
  BOOST_TEST_REQUIRE(bool(other), refusal(other));
  BOOST_TEST((*other != *prompts));
}

BOOST_AUTO_TEST_CASE(the_validation_prompts_are_max_val_samples_parity_prompts_of_another_seed_than_training) {
  constexpr std::uint64_t validate = 0x76616C6964617465;  // "validate": the validation set's seed is grpo.seed XOR it
  const auto held_out = tandem::validation_prompts(recipe_of({"grpo.seed=9", "grpo.max_val_samples=100"}));
  BOOST_TEST_REQUIRE(bool(held_out), refusal(held_out));
  BOOST_TEST((*held_out == tg::parity_prompts(9 ^ validate, 100, 64)));
  const auto training = tandem::training_prompts(recipe_of({"grpo.seed=9"}));
  BOOST_TEST_REQUIRE(bool(training), refusal(training));
  std::set<std::vector<std::int32_t>> trained(training->begin(), training->end());
  std::size_t shared = 0;
  for (const auto& p : *held_out) shared += trained.count(p);
  BOOST_TEST(shared <= 1u);  // held out: another stream of prompts (a short prompt may recur by chance)
  // The Gemma 4 engines: the same seed over the checkpoint's vocabulary, above its special ids.
  const auto gemma4 = tandem::validation_prompts(gemma4_recipe({"grpo.seed=9", "grpo.max_val_samples=7"}));
  BOOST_TEST_REQUIRE(bool(gemma4), refusal(gemma4));
  BOOST_TEST((*gemma4 == tg::parity_prompts(9 ^ validate, 7, 256, 3)));
}

BOOST_AUTO_TEST_CASE(env_parity_scores_the_parity_reward_of_the_generated_tokens) {
  const auto reward = tandem::reward_for(recipe_of({"env.name=parity"}));
  BOOST_TEST_REQUIRE(bool(reward), refusal(reward));
  tandem::trajectory t;
  t.prompt = {2};  // the prompt does not count
  BOOST_TEST((*reward)(t)->reward == 0.0);
  t.tokens = {3, 8};
  BOOST_TEST((*reward)(t)->reward == 1.0);
  BOOST_TEST((*reward)(t)->done);
  t.tokens = {8, 3};
  BOOST_TEST((*reward)(t)->reward == 0.0);
  BOOST_TEST(bool(tandem::reward_for(recipe_of({}))));  // parity is the default
}

BOOST_AUTO_TEST_CASE(env_math_and_arithmetic_have_no_token_reward_here_their_text_scoring_is_the_run_tasks) {
  for (const std::string name : {"math", "arithmetic"}) {
    auto recipe = recipe_of({});  // the rules refuse these on the fake engines: set past them
    recipe.env.name = name == "math" ? tc::environment_kind::math : tc::environment_kind::arithmetic;
    const auto reward = tandem::reward_for(recipe);
    BOOST_TEST_REQUIRE(!reward, name);
    BOOST_TEST((reward.error().code() == tg::status_code::invalid_argument));
    BOOST_TEST(reward.error().message() == "env.name: " + name +
                                               ": a text task, scored over the model's tokenizer (load_run_task, run_task.hpp)");
  }
}

BOOST_AUTO_TEST_SUITE_END()
