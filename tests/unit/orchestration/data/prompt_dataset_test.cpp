// Prompt datasets in JSON lines (orchestration/data/prompt_dataset.h): the three record forms
// read back, and every bad record is refused naming the file, the line and what is wrong.
#include "orchestration/data/prompt_dataset.h"

#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <string>

namespace td = tandem::data;

namespace {

std::string refusal(const std::string& text) {
  const auto r = td::parse_prompt_dataset(text, "train.jsonl");
  BOOST_REQUIRE_MESSAGE(!r, "the dataset was accepted");
  return r.error().message;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(prompt_dataset_test)

BOOST_AUTO_TEST_CASE(plain_chat_and_pre_tokenized_records_read_back_with_their_lines) {
  const std::string text =
      "\xEF\xBB\xBF{\"prompt\": \"What is 2 + 3?\", \"answer\": \"5\", \"source\": \"gsm8k\"}\n"
      "\n"
      "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"7*6?\"}], "
      "\"answer\": \"42\"}\r\n"
      "{\"input_ids\": [2, 105, 2364], \"answer\": \"\\\\frac{1}{2}\"}";
  const auto r = td::parse_prompt_dataset(text, "train.jsonl");
  BOOST_REQUIRE_MESSAGE(r, (r ? "" : r.error().message));
  BOOST_REQUIRE_EQUAL(r->size(), 3u);
  BOOST_TEST((*r)[0].line == 1u);
  BOOST_TEST(*(*r)[0].prompt == "What is 2 + 3?");
  BOOST_TEST((*r)[0].answer == "5");
  BOOST_TEST((*r)[1].line == 3u);
  BOOST_TEST(!(*r)[1].prompt);
  BOOST_TEST(((*r)[1].messages == std::vector<td::chat_message>{{"system", "Be brief."}, {"user", "7*6?"}}));
  BOOST_TEST((*r)[2].line == 4u);
  BOOST_TEST(((*r)[2].input_ids.value() == std::vector<std::int32_t>{2, 105, 2364}));
  BOOST_TEST((*r)[2].answer == "\\frac{1}{2}");
}

BOOST_AUTO_TEST_CASE(a_bad_record_is_refused_naming_the_file_the_line_and_the_fault) {
  const std::string ok = "{\"prompt\": \"p\", \"answer\": \"a\"}\n";
  BOOST_TEST(refusal(ok + "{\"prompt\": \"p\", \"answer\": 42}\n") == "train.jsonl:2: \"answer\" must be a string, got number 42");
  BOOST_TEST(refusal(ok + ok + "{\"prompt\": \"p\"}\n") == "train.jsonl:3: the record has no \"answer\"");
  BOOST_TEST(refusal("{\"promt\": \"p\", \"answer\": \"a\"}") ==
             "train.jsonl:1: the record has none of \"prompt\", \"messages\" and \"input_ids\"");
  BOOST_TEST(refusal("{\"prompt\": \"p\", \"input_ids\": [1], \"answer\": \"a\"}") ==
             "train.jsonl:1: the record has more than one of \"prompt\", \"messages\" and \"input_ids\"; give one");
  BOOST_TEST(refusal("{\"messages\": [{\"role\": \"tool\", \"content\": \"x\"}], \"answer\": \"a\"}") ==
             "train.jsonl:1: messages[0].role must be system, user, assistant or model, got \"tool\"");
  BOOST_TEST(refusal("{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": \"assistant\", \"content\": \"y\"}], \"answer\": \"a\"}") ==
             "train.jsonl:1: the last message is the model's (assistant); a prompt ends with the user's turn");
  BOOST_TEST(refusal("{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": \"system\", \"content\": \"y\"}, {\"role\": \"user\", \"content\": \"z\"}], \"answer\": \"a\"}") ==
             "train.jsonl:1: messages[1]: a system message must come first");
  BOOST_TEST(refusal("{\"input_ids\": [1, -2], \"answer\": \"a\"}") ==
             "train.jsonl:1: input_ids[1] must be a token id (an integer in [0, 2^31)), got number -2");
  BOOST_TEST(refusal("[1, 2]") == "train.jsonl:1: a record must be a JSON object, got array [1,2]");
  BOOST_TEST(refusal(ok + "{\"prompt\": \"p\", \"answer\": \"a\"").starts_with("train.jsonl:2: not a JSON record: parse error"));
  BOOST_TEST(refusal("\n  \n") == "train.jsonl: no records (a prompt dataset is JSON lines, one record per line)");
  BOOST_TEST(refusal("{\"prompt\": \"\xC3(\", \"answer\": \"a\"}").starts_with("train.jsonl:1: not a JSON record: "));
}

BOOST_AUTO_TEST_CASE(a_file_reads_as_its_text_and_a_missing_one_is_named) {
  const auto dir = std::filesystem::temp_directory_path() / ("tandem-dataset-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  {
    std::ofstream(dir / "d.jsonl") << "{\"prompt\": \"p\", \"answer\": \"a\"}\n{\"prompt\": \"q\", \"answer\": 1}\n";
  }
  const auto r = td::read_prompt_dataset(dir / "d.jsonl");
  BOOST_REQUIRE(!r);
  BOOST_TEST(r.error().message == (dir / "d.jsonl").string() + ":2: \"answer\" must be a string, got number 1");
  const auto missing = td::read_prompt_dataset(dir / "none.jsonl");
  BOOST_REQUIRE(!missing);
  BOOST_TEST(missing.error().message == (dir / "none.jsonl").string() + ": cannot be read");
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_SUITE_END()
