// `tandem run` on text tasks with the Gemma 4 CPU engines: the default recipe's arithmetic task
// (a supervised warm-up, then GRPO, validated on held-out problems) and a dataset of prompts and
// answers. The checks read what the run wrote and recompute each reward from the response's text
// with the model's own tokenizer.
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "orchestration/environments/arithmetic_task.h"
#include "orchestration/tokenizer/tokenizer.h"
#include "run_checks.hpp"

using namespace runtime_test;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

const std::string default_recipe = std::string(TANDEM_SOURCE_DIR) + "/configs/recipes/tiny-cpu.yaml";
const fs::path arithmetic_model = fs::path(TANDEM_SOURCE_DIR) / "configs/models/tiny-arithmetic";

struct finished_run {
  std::vector<json> metrics, generations;
  std::string output;
};

finished_run run_recipe(const std::string& recipe, const fs::path& logs, const std::vector<std::string>& overrides) {
  std::vector<std::string> args = {tandem_binary, "run", recipe, "logger.log_dir=" + logs.string()};
  args.insert(args.end(), overrides.begin(), overrides.end());
  child_process run(args);
  const int code = run.exit_code(std::chrono::milliseconds(100000));
  finished_run out;
  out.output = run.out() + run.err();
  BOOST_TEST_REQUIRE(code == 0, run.output());
  out.metrics = records(logs / "metrics.jsonl");
  out.generations = records(logs / "generations.jsonl");
  return out;
}

/// The exact-match reward of a generation record, recomputed from its tokens' text.
double recomputed_reward(const tandem::tokenizer::tokenizer& t, const json& g) {
  const auto prompt = *t.decode(g["prompt"].get<std::vector<std::int32_t>>(), true);
  const auto plus = prompt.find('+');
  const int a = std::stoi(prompt.substr(0, plus)), b = std::stoi(prompt.substr(plus + 1));
  const auto response = t.decode(g["tokens"].get<std::vector<std::int32_t>>(), true);
  return response ? tandem::environments::arithmetic_reward(*response, std::to_string(a + b)) : 0.0;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(task_run_test)

BOOST_AUTO_TEST_CASE(an_arithmetic_run_warms_up_then_validates_on_held_out_problems_scored_by_their_sums) {
  tandem::test::temp_dir dir;
  const auto run = run_recipe(default_recipe, dir.path(),
                              {"sft.max_num_steps=3", "sft.batch_size=8", "grpo.max_num_steps=2", "grpo.val_period=1",
                               "grpo.max_val_samples=16", "grpo.num_prompts_per_step=4", "grpo.num_generations_per_prompt=4",
                               "policy.train_global_batch_size=16", "env.arithmetic.max_operand=9"});
  BOOST_TEST_REQUIRE(run.metrics.size() == 5u, run.output);
  for (std::size_t i = 0; i < 3; ++i) {  // the warm-up: its own record per step
    const json& m = run.metrics[i];
    BOOST_TEST(m["step"] == i + 1);
    BOOST_TEST(m["sft/loss"].get<double>() > 0.0);
    BOOST_TEST(m["sft/lr"].get<double>() == 1.0e-2);
    // 8 targets of 1 or 2 digits and <eos>: 16 to 24 tokens.
    BOOST_TEST((m["sft/num_tokens"].get<int>() >= 16 && m["sft/num_tokens"].get<int>() <= 24));
    BOOST_TEST(m["trained_to"] == i + 1);
    BOOST_TEST(!m.contains("train/reward"));
  }
  BOOST_TEST(!run.metrics[1].contains("validation/accuracy"));
  BOOST_TEST(run.metrics[2].contains("validation/accuracy"));  // right after the warm-up
  for (std::size_t i = 3; i < 5; ++i) {
    BOOST_TEST(run.metrics[i].contains("train/reward"));
    BOOST_TEST(run.metrics[i].contains("validation/accuracy"));  // val_period 1 counts RL steps
    BOOST_TEST(run.metrics[i]["train/lr"].get<double>() == 1.0e-3);
  }
  BOOST_TEST(run.output.find("warm-up 3/3") != std::string::npos, run.output);
  BOOST_TEST(run.output.find("3 warm-up and 2 RL steps done") != std::string::npos, run.output);
  // Only RL steps generate: 2 steps x 16 trajectories, each reward the exact match of its text.
  BOOST_TEST_REQUIRE(run.generations.size() == 32u);
  const auto t = *tandem::tokenizer::tokenizer::load(arithmetic_model / "tokenizer.json");
  std::set<std::string> prompts;
  for (const json& g : run.generations) {
    BOOST_TEST(g["raw_reward"].get<double>() == recomputed_reward(t, g), g.dump());
    const auto text = *t.decode(g["prompt"].get<std::vector<std::int32_t>>(), true);
    prompts.insert(text);
    for (const char c : text) BOOST_TEST((c == '+' || c == '=' || (c >= '0' && c <= '9')), text);
    BOOST_TEST(text.size() <= 4u, text);  // operands of one digit (max_operand 9)
  }
  BOOST_TEST(prompts.size() == 8u);  // 2 steps x 4 prompts, none twice within an epoch
}

BOOST_AUTO_TEST_CASE(a_run_ends_after_max_num_epochs_passes_over_its_dataset) {
  // Six records, two a step, two epochs: six steps however many grpo.max_num_steps allows, each
  // epoch every record once (shuffled), each reward checked against its record's answer.
  tandem::test::temp_dir dir;
  const auto data = dir.write("train.jsonl",
                              "{\"prompt\": \"1+2=\", \"answer\": \"3\"}\n{\"prompt\": \"4+4=\", \"answer\": \"8\"}\n"
                              "{\"prompt\": \"9+0=\", \"answer\": \"9\"}\n{\"input_ids\": [2, 5, 14, 5, 17], \"answer\": \"2\"}\n"
                              "{\"prompt\": \"7+7=\", \"answer\": \"14\"}\n{\"prompt\": \"3+5=\", \"answer\": \"8\"}\n");
  const auto run = run_recipe(default_recipe, dir.path() / "logs",
                              {"data.train_dataset=" + data, "sft.max_num_steps=2", "sft.batch_size=4",
                               "grpo.max_num_steps=100", "grpo.max_num_epochs=2", "grpo.num_prompts_per_step=2",
                               "grpo.num_generations_per_prompt=2", "policy.train_global_batch_size=4", "grpo.val_period=0"});
  BOOST_TEST_REQUIRE(run.metrics.size() == 2u + 6u, run.output);
  BOOST_TEST(run.output.find("the RL phase ends after step 6: grpo.max_num_epochs 2 over 6 training prompts at 2 per step") !=
                 std::string::npos,
             run.output);
  const std::vector<std::string> answers = {"3", "8", "9", "2", "14", "8"};
  const auto t = *tandem::tokenizer::tokenizer::load(arithmetic_model / "tokenizer.json");
  std::map<int, std::set<std::uint64_t>> per_epoch;
  for (const json& g : run.generations) {
    const auto record = g["record"].get<std::uint64_t>();
    const int rl_step = g["step"].get<int>() - 2;  // records number every step; 2 warm-up steps came first
    per_epoch[(rl_step - 1) / 3].insert(record);
    const auto response = t.decode(g["tokens"].get<std::vector<std::int32_t>>(), true);
    const double expected = response ? tandem::environments::arithmetic_reward(*response, answers[record]) : 0.0;
    BOOST_TEST(g["raw_reward"].get<double>() == expected, g.dump());
  }
  BOOST_TEST(per_epoch.size() == 2u);
  for (const auto& [epoch, seen] : per_epoch) BOOST_TEST(seen.size() == 6u, "epoch " << epoch);
}

BOOST_AUTO_TEST_CASE(a_run_whose_dataset_has_a_bad_line_is_refused_naming_the_file_and_line_before_any_member_starts) {
  tandem::test::temp_dir dir;
  const auto data = dir.write("train.jsonl", "{\"prompt\": \"1+2=\", \"answer\": \"3\"}\n{\"prompt\": \"4+4=\", \"answer\": 8}\n");
  child_process run({tandem_binary, "run", default_recipe, "logger.log_dir=" + (dir.path() / "logs").string(),
                     "data.train_dataset=" + data, "grpo.val_period=0"});
  BOOST_TEST(run.exit_code(std::chrono::milliseconds(30000)) == 1);
  BOOST_TEST(run.err().find("data.train_dataset: " + data + ":2: \"answer\" must be a string, got number 8") !=
                 std::string::npos,
             run.err());
  BOOST_TEST(!fs::exists(dir.path() / "logs" / "metrics.jsonl"));
}

BOOST_AUTO_TEST_SUITE_END()
