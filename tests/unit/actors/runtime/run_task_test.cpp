// What a run trains and validates on and how it scores (actors/runtime/run_task.hpp): a dataset's
// records through the model's tokenizer.json, left out when too long, each with its answer; the
// math checkers and the arithmetic task scoring the decoded text of a response; the warm-up's
// targets; and the refusals, each naming the key and, for a record, its file and line.
#include "actors/runtime/run_task.hpp"

#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpu/model/json_text.h"
#include "orchestration/tokenizer/tokenizer.h"
#include "support/small_recipe.h"
#include "support/temp_dir.h"

namespace fs = std::filesystem;

namespace {

const fs::path source = TANDEM_SOURCE_DIR;

template <class T>
std::string refusal(const tandem::gpu::result<T>& r) {
  return r ? std::string() : r.error().message();
}

/// A model directory (config.json only: the controller reads no weights) whose vocabulary holds
/// the tokenizer fixture's 553 ids, with that tokenizer.json.
fs::path math_model(const tandem::test::temp_dir& dir) {
  auto config = nlohmann::json::parse(*tandem::gpu::read_text_file(source / "configs/models/tiny-arithmetic/config.json"));
  config["vocab_size"] = 600;  // more than the fixture tokenizer's 553 ids
  config["vocab_size_per_layer_input"] = 600;
  const fs::path model = dir.path() / "model";
  fs::create_directories(model);
  std::ofstream(model / "config.json") << config.dump(2);
  fs::copy_file(source / "tests/data/tokenizer/tokenizer.json", model / "tokenizer.json");
  return model;
}

tandem::trajectory response(const tandem::tokenizer::tokenizer& t, const std::string& text, const std::string& answer) {
  tandem::trajectory x;
  x.tokens = *t.encode(text);
  x.tokens.push_back(1);  // <eos>: a special token, left out of the text
  x.answer = answer;
  return x;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(run_task_test)

BOOST_AUTO_TEST_CASE(a_math_task_scores_each_response_by_its_records_answer_with_the_checker_the_recipe_names) {
  tandem::test::temp_dir dir;
  const fs::path model = math_model(dir);
  const auto train = dir.write("train.jsonl",
                               "{\"prompt\": \"What is 2+3?\", \"answer\": \"5\"}\n"
                               "\n"
                               "{\"input_ids\": [2, 40, 41], \"answer\": \"\\\\frac{1}{2}\"}\n"
                               "{\"prompt\": \"a prompt far longer than the sixteen tokens this recipe allows, so it is "
                               "left out and counted\", \"answer\": \"7\"}\n");
  const auto val = dir.write("val.jsonl", "{\"prompt\": \"What is 1+1?\", \"answer\": \"2\"}\n");
  const auto base = std::vector<std::string>{"runtime.engine=gemma4", "policy.model_name=" + model.string(), "env.name=math",
                                             "data.train_dataset=" + train,
                                             "data.validation_dataset=" + val, "grpo.val_period=1"};
  const auto recipe = tandem::test::small_recipe(base);
  const auto task = tandem::load_run_task(recipe);
  BOOST_TEST_REQUIRE(bool(task), refusal(task));
  const auto t = *tandem::tokenizer::tokenizer::load(model / "tokenizer.json");
  BOOST_TEST_REQUIRE(task->training.tokens.size() == 2u);
  BOOST_TEST(task->training.tokens[0] == *t.encode("What is 2+3?", true), boost::test_tools::per_element());
  BOOST_TEST(task->training.tokens[0].front() == 2);  // the template's <bos>
  BOOST_TEST(task->training.tokens[1] == (std::vector<std::int32_t>{2, 40, 41}), boost::test_tools::per_element());
  BOOST_TEST(task->training.answers == (std::vector<std::string>{"5", "\\frac{1}{2}"}), boost::test_tools::per_element());
  BOOST_TEST(task->training.records == 3u);
  BOOST_TEST(task->training.skipped == 1u);
  const auto notes = tandem::skipped_prompt_notes(*task, recipe);
  BOOST_TEST_REQUIRE(notes.size() == 1u);
  BOOST_TEST(notes[0] == "1 of 3 prompts of " + train +
                             " are longer than data.max_input_seq_length (16 tokens) and left out");
  BOOST_TEST_REQUIRE(task->validation.has_value());
  BOOST_TEST(task->validation->answers == std::vector<std::string>{"2"}, boost::test_tools::per_element());
  BOOST_TEST(task->sft.empty());

  // answer_line (the default): the last "Answer:" line, normalised, against the record's answer.
  BOOST_TEST(task->score(response(t, "so 2 + 3 is five.\nAnswer: 5", "5"))->reward == 1.0);
  BOOST_TEST(task->score(response(t, "Answer: 6", "5"))->reward == 0.0);
  BOOST_TEST(task->score(response(t, "Answer: $\\frac12$", "\\frac{1}{2}"))->reward == 1.0);
  BOOST_TEST(task->score(response(t, "\\boxed{5}", "5"))->reward == 0.0);
  // strict_boxed: the last \boxed{} of the last 100 characters, as given.
  auto boxed_recipe = base;
  boxed_recipe.push_back("env.math.checker=strict_boxed");
  const auto boxed = tandem::load_run_task(tandem::test::small_recipe(boxed_recipe));
  BOOST_TEST_REQUIRE(bool(boxed), refusal(boxed));
  BOOST_TEST(boxed->score(response(t, "so \\boxed{5}", "5"))->reward == 1.0);
  BOOST_TEST(boxed->score(response(t, "Answer: 5", "5"))->reward == 0.0);
  // An id the tokenizer has no text for cannot be an answer: 0, not an error.
  tandem::trajectory odd = response(t, "Answer: 5", "5");
  odd.tokens.push_back(599);
  BOOST_TEST(task->score(odd)->reward == 0.0);
}

BOOST_AUTO_TEST_CASE(a_messages_record_becomes_the_ids_of_its_gemma_4_chat_rendering_with_the_generation_prompt) {
  tandem::test::temp_dir dir;
  const fs::path model = math_model(dir);
  const auto train = dir.write("chat.jsonl",
                               "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, "
                               "{\"role\": \"user\", \"content\": \"7*6?\"}], \"answer\": \"42\"}\n");
  const auto recipe = tandem::test::small_recipe({"runtime.engine=gemma4", "policy.model_name=" + model.string(),
                                                  "env.name=math", "data.train_dataset=" + train,
                                                  "data.max_input_seq_length=64", "policy.max_total_sequence_length=80"});
  const auto task = tandem::load_run_task(recipe);
  BOOST_TEST_REQUIRE(bool(task), refusal(task));
  const auto t = *tandem::tokenizer::tokenizer::load(model / "tokenizer.json");
  const auto expected = t.encode("<bos><|turn>system\nBe brief.<turn|>\n<|turn>user\n7*6?<turn|>\n"
                                 "<|turn>model\n<|channel>thought\n<channel|>");
  BOOST_TEST_REQUIRE(task->training.tokens.size() == 1u);
  BOOST_TEST(task->training.tokens[0] == *expected, boost::test_tools::per_element());
  BOOST_TEST(task->training.tokens[0].front() == 2);  // one <bos>, from the rendering
  BOOST_TEST(task->training.tokens[0][1] != 2);
  BOOST_TEST(task->training.answers == std::vector<std::string>{"42"}, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_bad_record_an_id_outside_the_model_or_a_missing_tokenizer_is_refused_naming_the_key_the_file_and_the_line) {
  tandem::test::temp_dir dir;
  const fs::path model = math_model(dir);
  const auto bad = dir.write("bad.jsonl", "{\"prompt\": \"fine\", \"answer\": \"1\"}\n{\"prompt\": \"no answer\"}\n");
  const auto chat = dir.write("chat.jsonl", "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"answer\": \"1\"}\n");
  const auto ids = dir.write("ids.jsonl", "{\"input_ids\": [2, 600], \"answer\": \"1\"}\n");
  auto recipe = [&](const fs::path& data, const fs::path& m) {
    return tandem::test::small_recipe({"runtime.engine=gemma4", "policy.model_name=" + m.string(), "env.name=math",
                                       "data.train_dataset=" + data.string()});
  };
  const auto b = tandem::load_run_task(recipe(bad, model));
  BOOST_TEST_REQUIRE(!b);
  BOOST_TEST(b.error().message().starts_with("data.train_dataset: " + bad + ":2: "), b.error().message());
  const auto i = tandem::load_run_task(recipe(ids, model));
  BOOST_TEST_REQUIRE(!i);
  BOOST_TEST(i.error().message() == "data.train_dataset: " + ids +
                                        ":1: input_ids holds 600, outside the model's vocabulary of 600 tokens");
  // A model smaller than its tokenizer: the chat tokens (ids 550 to 552) fall outside it.
  auto config = nlohmann::json::parse(*tandem::gpu::read_text_file(model / "config.json"));
  config["vocab_size"] = 550;
  config["vocab_size_per_layer_input"] = 550;
  std::ofstream(model / "config.json") << config.dump(2);
  const auto c = tandem::load_run_task(recipe(chat, model));
  BOOST_TEST_REQUIRE(!c);
  BOOST_TEST(c.error().message() == "data.train_dataset: " + chat +
                                        ":1: the prompt's tokens hold 550, outside the model's vocabulary of 550 tokens");
  fs::remove(model / "tokenizer.json");
  const auto none = tandem::load_run_task(recipe(bad, model));
  BOOST_TEST_REQUIRE(!none);
  BOOST_TEST(none.error().message() == "policy.model_name: " + model.string() +
                                           " has neither tokenizer.json nor tokenizer.model, which data.train_dataset needs");
}

BOOST_AUTO_TEST_CASE(the_arithmetic_task_holds_out_its_validation_problems_and_warms_up_on_answers_ending_in_eos) {
  const std::string model = (source / "configs/models/tiny-arithmetic").string();
  const auto recipe = tandem::test::small_recipe({"runtime.engine=gemma4", "policy.model_name=" + model, "env.name=arithmetic",
                                                  "env.arithmetic.max_operand=19", "grpo.val_period=1",
                                                  "grpo.max_val_samples=40", "sft.max_num_steps=1"});
  const auto task = tandem::load_run_task(recipe);
  BOOST_TEST_REQUIRE(bool(task), refusal(task));
  BOOST_TEST(task->training.tokens.size() == 400u - 40u);
  BOOST_TEST_REQUIRE(task->validation.has_value());
  BOOST_TEST(task->validation->tokens.size() == 40u);
  const auto t = *tandem::tokenizer::tokenizer::load(fs::path(model) / "tokenizer.json");
  for (std::size_t i = 0; i < task->training.tokens.size(); ++i) {
    const std::string question = *t.decode(task->training.tokens[i], true);
    const auto plus = question.find('+');
    const int a = std::stoi(question.substr(0, plus)), b = std::stoi(question.substr(plus + 1));
    BOOST_TEST(task->training.answers[i] == std::to_string(a + b));
    BOOST_TEST(task->training.tokens[i].front() == 2);  // <bos>
    auto target = *t.encode(task->training.answers[i]);
    target.push_back(1);  // <eos>
    BOOST_TEST(task->sft[i].target == target, boost::test_tools::per_element());
    BOOST_TEST(task->sft[i].prompt == task->training.tokens[i], boost::test_tools::per_element());
  }
  BOOST_TEST(task->score(response(t, "37", "37"))->reward == 1.0);
  BOOST_TEST(task->score(response(t, " 37 ", "37"))->reward == 1.0);
  BOOST_TEST(task->score(response(t, "38", "37"))->reward == 0.0);
  BOOST_TEST(task->score(response(t, "3", "37"))->reward == 0.0);
}

BOOST_AUTO_TEST_SUITE_END()
