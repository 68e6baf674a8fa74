// Tests of the tandem command line (tools/cli/commands.h) through run_cli: version and help texts,
// usage errors, `validate` (origins, round trip, overrides, --schema, --minimize), `run --dry-run`,
// and the model checks (unknown preset, sequences longer than the model's positions).
#include "tools/cli/commands.h"
#include "support/cli_runner.h"

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "orchestration/config/resolve.h"
#include "support/temp_dir.h"
#include "orchestration/config/schema.h"
#include "tools/cli/model_resolution.h"

namespace fs = std::filesystem;
using tandem::test::cli;
using tandem::test::cli_result;
using tandem::test::temp_dir;
namespace tc = tandem::config;

namespace {


/// A fresh folder under the system temp directory, removed with its contents at scope exit.

const std::string tiny = "configs/recipes/tiny-fake-cpu.yaml";
const std::string tiny_abs = std::string(TANDEM_SOURCE_DIR) + "/configs/recipes/tiny-fake-cpu.yaml";

/// A rendered YAML line: "key: value", padded to 48 columns, then "  # comment".
std::string commented(const std::string& line, const std::string& comment) {
  std::string s = line;
  s.resize(48, ' ');
  return s + "  # " + comment + "\n";
}

/// Dotted paths of the leaf keys of nested YAML with two-space indentation, in order.
std::vector<std::string> leaf_paths(const std::string& yaml) {
  std::vector<std::string> out, sections;
  std::istringstream in(yaml);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const std::size_t indent = line.find_first_not_of(' ');
    const std::size_t colon = line.find(':');
    sections.resize(indent / 2);
    const std::string name = line.substr(indent, colon - indent);
    if (colon + 1 == line.size()) sections.push_back(name);
    else out.push_back([&] {
      std::string p;
      for (const auto& s : sections) p += s + ".";
      return p + name;
    }());
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cli_test)

BOOST_AUTO_TEST_CASE(version_prints_the_version_and_the_backends) {
  for (const char* flag : {"--version", "version"}) {
    const cli_result r = cli({flag});
    BOOST_TEST(r.code == 0);
    BOOST_TEST(r.err == "");
    BOOST_TEST(std::regex_search(r.out, std::regex("^tandem [0-9]+\\.[0-9]+\\.[0-9]+\nbackends: cpu \\(float32 reference\\)")),
               r.out);
  }
}

BOOST_AUTO_TEST_CASE(help_prints_the_usage_of_tandem_and_of_each_command) {
  cli_result r = cli({"help"});
  BOOST_TEST(r.code == 0);
  BOOST_TEST(r.out.starts_with("tandem: GRPO/DAPO post-training of Gemma 4 models\n\nusage: tandem <command> [arguments]\n"));
  r = cli({"help", "validate"});
  BOOST_TEST(r.code == 0);
  BOOST_TEST(r.out.starts_with("usage: tandem validate RECIPE [key=value ...]\n       tandem validate --minimize RECIPE\n"));
  r = cli({"help", "run"});
  BOOST_TEST(r.code == 0);
  BOOST_TEST(r.out.starts_with("usage: tandem run RECIPE [key=value ...] [--dry-run | --no-spawn] [--fresh]\n"));
  r = cli({"help", "frob"});
  BOOST_TEST(r.code == 2);
  BOOST_TEST(r.err == "tandem help: unknown command 'frob'\n");
  r = cli({});
  BOOST_TEST(r.code == 2);
  BOOST_TEST(r.out == "");
  BOOST_TEST(r.err.starts_with("tandem: GRPO/DAPO post-training of Gemma 4 models\n"));
}

BOOST_AUTO_TEST_CASE(an_unknown_command_or_option_is_a_usage_error_naming_it) {
  cli_result r = cli({"frob"});
  BOOST_TEST(r.code == 2);
  BOOST_TEST(r.out == "");
  BOOST_TEST(r.err == "tandem: unknown command 'frob' (commands: validate, run, join, keys, inspect, convert, logprobs, loss, generate, metrics, plot, tokenize, dataset, init, bench, help, --version)\n");
  r = cli({"validate", "--frob", tiny});
  BOOST_TEST(r.code == 2);
  BOOST_TEST(r.err == "tandem validate: unknown option '--frob' (options: --minimize, --schema)\n");
  r = cli({"run", tiny, "--frob"});
  BOOST_TEST(r.code == 2);
  BOOST_TEST(r.err == "tandem run: unknown option '--frob' (options: --dry-run, --fresh, --no-spawn)\n");
  r = cli({"validate"});
  BOOST_TEST(r.code == 2);
  BOOST_TEST(r.err == "tandem validate: missing RECIPE (see `tandem help validate`)\n");
  r = cli({"validate", tiny, "other.yaml"});
  BOOST_TEST(r.code == 2);
  BOOST_TEST(r.err == "tandem validate: unexpected argument 'other.yaml' (overrides are written key.path=value)\n");
}

BOOST_AUTO_TEST_CASE(validate_prints_yaml_whose_values_name_their_origin) {
  const cli_result r = cli({"validate", "configs/recipes/tiny-fake-cpu-dedicated.yaml"});
  BOOST_TEST(r.code == 0);
  BOOST_TEST(r.err == tiny + ":12:23: note: policy.logprob_chunk_size: 64 configures the Gemma 4 engines; runtime.engine: fake ignores it\n");  // the fake engines ignore it: said, not silent
  BOOST_TEST(r.out.starts_with("# tandem recipe configs/recipes/tiny-fake-cpu-dedicated.yaml, resolved (inherits " + tiny +
                               ")\n# a comment names where a value was set; values without one are schema defaults\n"
                               "grpo:\n" + commented("  num_prompts_per_step: 4", tiny + ":5:25")));
  BOOST_TEST(r.out.find("\n  max_num_epochs: 1\n") != std::string::npos);  // a schema default: no comment
  BOOST_TEST(r.out.find(commented("      enabled: false", "configs/recipes/tiny-fake-cpu-dedicated.yaml:7:16")) !=
             std::string::npos);
  BOOST_TEST(r.out.find(commented("  gpus_per_node: 4", "configs/recipes/tiny-fake-cpu-dedicated.yaml:11:18")) !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(the_printed_configuration_read_back_as_a_recipe_resolves_to_the_same_values) {
  for (const std::string& recipe : {tiny, std::string("configs/recipes/dapo-gemma4-e2b-2n8g-dedicated.yaml")}) {
    BOOST_TEST_CONTEXT(recipe) {
      const cli_result first = cli({"validate", recipe, "grpo.seed=7", "policy.generation.top_k=20"});
      BOOST_REQUIRE(first.code == 0);
      const temp_dir dir;
      const std::string copy = dir.write("resolved.yaml", first.out);
      const cli_result second = cli({"validate", copy});
      BOOST_TEST(second.code == 0);
      BOOST_TEST(second.err.find(": error: ") == std::string::npos, second.err);  // notes only
      const tc::resolution a = tc::resolve_recipe(recipe, {"grpo.seed=7", "policy.generation.top_k=20"});
      const tc::resolution b = tc::resolve_recipe(copy);
      BOOST_REQUIRE(a.recipe.has_value());
      BOOST_REQUIRE_MESSAGE(b.recipe.has_value(), tc::to_string(b.errors));
      for (const auto& key : tc::schema::recipes().keys())
        BOOST_TEST_CONTEXT(key.path) {
          BOOST_TEST(tc::to_yaml(a.recipe->values.at(key.path).value) == tc::to_yaml(b.recipe->values.at(key.path).value));
          BOOST_TEST((a.recipe->values.at(key.path).value == b.recipe->values.at(key.path).value));
        }
    }
  }
}

BOOST_AUTO_TEST_CASE(overrides_apply_and_name_themselves_as_the_origin) {
  const cli_result r = cli({"validate", tiny, "grpo.seed=7", "grpo.max_num_steps=3"});
  BOOST_TEST(r.code == 0);
  BOOST_TEST(r.out.find(commented("  seed: 7", "override 1 'grpo.seed=7'")) != std::string::npos);
  BOOST_TEST(r.out.find(commented("  max_num_steps: 3", "override 2 'grpo.max_num_steps=3'")) != std::string::npos);
  BOOST_TEST(r.out.find("seed: 42") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(bad_overrides_are_refused_with_their_position_and_reason) {
  const std::map<std::string, std::string> cases = {
      {"grpo.seed=-1", "override 1 'grpo.seed=-1': error: grpo.seed: must be >= 0, got -1\n"},
      {"grpo.seed=abc", "override 1 'grpo.seed=abc': error: grpo.seed: expected an integer, got 'abc'\n"},
      {"grpo.sed=7", "override 1 'grpo.sed=7': error: grpo.sed: unknown key; did you mean 'grpo.seed'?\n"},
  };
  for (const auto& [override_text, message] : cases) {
    BOOST_TEST_CONTEXT(override_text) {
      const cli_result r = cli({"validate", tiny, override_text});
      BOOST_TEST(r.code == 1);
      BOOST_TEST(r.out == "");
      BOOST_TEST(r.err == message);
    }
  }
}

BOOST_AUTO_TEST_CASE(the_schema_lists_every_key_exactly_once_in_declaration_order) {
  const cli_result r = cli({"validate", "--schema"});
  BOOST_TEST(r.code == 0);
  std::vector<std::string> expected;
  for (const auto& k : tc::schema::recipes().keys()) expected.push_back(k.path);
  const std::vector<std::string> listed = leaf_paths(r.out);
  BOOST_TEST(listed == expected, boost::test_tools::per_element());
  BOOST_TEST(r.out.find(commented("  seed: 42", "int >= 0. Seed of every random stream (data order, sampling)")) !=
             std::string::npos);
  const cli_result extra = cli({"validate", "--schema", tiny});
  BOOST_TEST(extra.code == 2);
  BOOST_TEST(extra.err == "tandem validate: --schema takes no other argument\n");
}

BOOST_AUTO_TEST_CASE(minimize_names_each_key_that_repeats_its_inherited_value) {
  const temp_dir dir;
  const std::string child = dir.write("child.yaml", "defaults: " + tiny_abs +
                                                        "\ngrpo:\n  num_prompts_per_step: 4\n  seed: 42\n  max_num_steps: 21\n");
  const cli_result r = cli({"validate", "--minimize", child});
  BOOST_TEST(r.code == 1);
  BOOST_TEST(r.err == "");
  BOOST_TEST(r.out == child + ":3:3: grpo.num_prompts_per_step: 4 repeats the value inherited from " + tiny_abs + ":5:25\n" +
                          child + ":4:3: grpo.seed: 42 repeats the value inherited from the schema default\n");
  const cli_result with_override = cli({"validate", "--minimize", child, "grpo.seed=1"});
  BOOST_TEST(with_override.code == 2);
  BOOST_TEST(with_override.err == "tandem validate: --minimize checks a recipe file and takes no overrides\n");
}

BOOST_AUTO_TEST_CASE(a_dry_run_prints_the_members_table) {
  const cli_result r = cli({"run", tiny, "--dry-run"});
  BOOST_TEST(r.code == 0);
  BOOST_TEST(r.err == tiny + ":12:23: note: policy.logprob_chunk_size: 64 configures the Gemma 4 engines; runtime.engine: fake ignores it\n");
  BOOST_TEST(r.out.starts_with("tandem run " + tiny + " (dry run: nothing is started)\n"));
  BOOST_TEST(r.out.find("members (one process per device)\n"
                        "  rank  node  device   actors                          dp rank  rollout rank\n"
                        "  0     0     cpu:0    policy_worker + rollout_worker  0/2      0/2\n"
                        "  1     0     cpu:1    policy_worker + rollout_worker  1/2      1/2\n\n") != std::string::npos,
             r.out);
  BOOST_TEST(r.out.find("controller  control plane tcp://127.0.0.1:29650 ") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(running_on_cuda_over_several_devices_or_with_the_fake_engines_is_refused_saying_why) {
  const cli_result r = cli({"run", tiny, "cluster.backend=cuda"});
  BOOST_TEST(r.code == 1);
  BOOST_TEST(r.out == "");
  const std::string several = "cluster.backend: cuda: on CUDA the RL loop runs on one device (cluster.num_nodes 1, "
                              "cluster.gpus_per_node 1, policy and rollout colocated); refits and gradients between devices "
                              "over NCCL are not built yet\n";
  const std::string fake = ":29:11: %: runtime.engine: fake: the fake engines run on cluster.backend: cpu only\n";
  const auto expected = [&](const std::string& level) {
    std::string f = fake;
    f.replace(f.find('%'), 1, level);
    return "override 1 'cluster.backend=cuda': " + level + ": " + several + tiny + f;
  };
  BOOST_TEST(r.err == "tandem run: " + tiny + " asks for 2 things this build cannot run yet:\n" + expected("error"));
  // validate accepts it, noting the same two settings (and, as for any fake run, a key it ignores).
  const cli_result v = cli({"validate", tiny, "cluster.backend=cuda"});
  BOOST_TEST(v.code == 0);
  BOOST_TEST(v.err == expected("note") + tiny + ":12:23: note: policy.logprob_chunk_size: 64 configures the Gemma 4 engines; "
                                              "runtime.engine: fake ignores it\n");
}

BOOST_AUTO_TEST_CASE(a_gemma4_run_of_a_model_without_weights_is_refused_at_policy_model_name_before_any_member_starts) {
  const temp_dir dir;
  const cli_result r = cli({"run", tiny, "runtime.engine=gemma4", "logger.log_dir=" + (dir.path() / "run").string()});
  BOOST_TEST(r.code == 1);
  BOOST_TEST(r.out == "");
  const std::string preset = (fs::path(TANDEM_SOURCE_DIR) / "configs" / "models" / "tiny-all").lexically_normal().string();
  BOOST_TEST(r.err == tiny + ":9:15: error: policy.model_name: " + preset +
                          " holds a config.json but no weights (model.safetensors, or an index and its shards): "
                          "runtime.engine gemma4 loads a checkpoint (a preset in configs/models/ is a config only)\n",
             r.err);
  BOOST_TEST(!fs::exists(dir.path() / "run"));  // refused before the run's directory was made
}

BOOST_AUTO_TEST_CASE(a_model_that_is_not_a_preset_is_refused_at_policy_model_name) {
  const temp_dir dir;
  const std::string recipe = dir.write("recipe.yaml", "defaults: " + tiny_abs + "\npolicy:\n  model_name: no-such-model\n");
  const std::string expected = recipe + ":3:15: error: policy.model_name: 'no-such-model' is not a directory with a "
                               "config.json, a preset in " + (tandem::cli::config_dir() / "models").string() +
                               " (gemma-4-12B, gemma-4-26B-A4B, gemma-4-31B, gemma-4-E2B, gemma-4-E4B, tiny-all, "
                               "tiny-arithmetic, tiny-dense, tiny-e), or a model in the Hugging Face cache (";
  const cli_result r = cli({"validate", recipe});
  BOOST_TEST(r.code == 1);
  BOOST_TEST(r.out == "");
  BOOST_TEST(r.err.starts_with(expected), r.err);
  BOOST_TEST(r.err.ends_with(")\n"));
  BOOST_TEST(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  const cli_result run = cli({"run", recipe, "--dry-run"});
  BOOST_TEST(run.code == 1);
  BOOST_TEST(run.err == r.err);
}

BOOST_AUTO_TEST_CASE(a_sequence_longer_than_the_model_positions_is_refused) {
  std::ifstream in(std::string(TANDEM_SOURCE_DIR) + "/configs/models/tiny-all/config.json");
  const std::string json((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string field = "\"max_position_embeddings\": 131072";
  BOOST_REQUIRE(json.find(field) != std::string::npos);
  for (const int positions : {48, 64}) {
    BOOST_TEST_CONTEXT(positions) {
      const temp_dir dir;
      fs::create_directories(dir.path() / "model");
      std::string changed = json;
      changed.replace(changed.find(field), field.size(), "\"max_position_embeddings\": " + std::to_string(positions));
      dir.write("model/config.json", changed);
      const std::string model = "policy.model_name=" + (dir.path() / "model").string();
      const cli_result r = cli({"validate", tiny, model});
      if (positions == 48) {  // tiny-fake-cpu.yaml asks for 64 tokens
        BOOST_TEST(r.code == 1);
        BOOST_TEST(r.out == "");
        BOOST_TEST(r.err == tiny + ":11:30: error: policy.max_total_sequence_length: 64 exceeds the model's "
                                   "max_position_embeddings (48)\n");
        BOOST_TEST(cli({"run", tiny, model, "--dry-run"}).err == r.err);
      } else {
        BOOST_TEST(r.code == 0);
        BOOST_TEST(r.err == tiny + ":12:23: note: policy.logprob_chunk_size: 64 configures the Gemma 4 engines; runtime.engine: fake ignores it\n");
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(init_writes_a_loadable_checkpoint_that_is_a_pure_function_of_config_and_seed_and_never_overwrites) {
  const temp_dir dir;
  const std::string config = std::string(TANDEM_SOURCE_DIR) + "/configs/models/tiny-arithmetic";
  const auto a = dir.path() / "a", b = dir.path() / "b", c = dir.path() / "c";
  auto r = cli({"init", "--config", config, "--out", a.string(), "--seed", "7", "--tokenizer", config});
  BOOST_TEST_REQUIRE(r.code == 0, r.err);
  BOOST_TEST(r.out.find("248260 parameters (seed 7") != std::string::npos, r.out);
  for (const char* f : {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"})
    BOOST_TEST(std::filesystem::is_regular_file(a / f), f);
  BOOST_TEST(cli({"inspect", "--model", a.string()}).code == 0);  // every header and name checked as a load does
  BOOST_TEST_REQUIRE(cli({"init", "--config", config, "--out", b.string(), "--seed", "7"}).code == 0);
  BOOST_TEST_REQUIRE(cli({"init", "--config", config, "--out", c.string(), "--seed", "8"}).code == 0);
  auto bytes = [](const std::filesystem::path& p) {
    std::ifstream in(p / "model.safetensors", std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  BOOST_TEST((bytes(a) == bytes(b)));
  BOOST_TEST((bytes(a) != bytes(c)));
  BOOST_TEST(!std::filesystem::exists(b / "tokenizer.json"));
  // The committed model is this command's output for seed 1.
  const auto d = dir.path() / "d";
  BOOST_TEST_REQUIRE(cli({"init", "--config", config, "--out", d.string()}).code == 0);
  BOOST_TEST((bytes(d) == bytes(config)));
  r = cli({"init", "--config", config, "--out", a.string()});
  BOOST_TEST(r.code == 1);
  BOOST_TEST(r.err == "tandem init: --out " + a.string() + ": already exists (init writes a new directory)\n");
  BOOST_TEST(cli({"init", "--config", config}).code == 2);
}

BOOST_AUTO_TEST_SUITE_END()
