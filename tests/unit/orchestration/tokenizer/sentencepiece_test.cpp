// A checkpoint with only a SentencePiece tokenizer.model (orchestration/tokenizer/
// sentencepiece_model.h, through tokenizer::load_model) against the ids transformers' Gemma
// tokenizer gave for a committed corpus when it read the same file (tests/data/sentencepiece/,
// written by tools/reference/make_sentencepiece_fixture.py): plain text, white-space runs, digits,
// unseen scripts (byte fallback), emoji, control-token text (<bos>, <unk>, <pad>) and user-defined
// pieces encode to the same ids with and without <bos>, decode to the same text with and without
// special tokens, and decode(encode(x)) is x. A bad file, bad text and a bad id are refused.
#include "orchestration/tokenizer/tokenizer.h"

#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <unistd.h>
#include <vector>

namespace fs = std::filesystem;
namespace tt = tandem::tokenizer;
using ids = std::vector<std::int32_t>;

namespace {

const fs::path fixture = fs::path(TANDEM_SOURCE_DIR) / "tests/data/sentencepiece";

/// A fresh directory under the temporary directory, removed at the end of the test.
struct scratch {
  fs::path dir = fs::temp_directory_path() / ("tandem-spm-" + std::to_string(::getpid()));
  scratch() { fs::create_directories(dir); }
  ~scratch() { fs::remove_all(dir); }
  void write(const std::string& name, const std::string& text) const { std::ofstream(dir / name, std::ios::binary) << text; }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(sentencepiece_test)

BOOST_AUTO_TEST_CASE(a_tokenizer_model_gives_transformers_ids_and_text_on_the_recorded_corpus) {
  const auto t = tt::tokenizer::load_model(fixture);
  BOOST_REQUIRE_MESSAGE(bool(t), (t ? std::string() : t.error().message));
  BOOST_TEST(t->format() == std::string("tokenizer.model"));
  BOOST_TEST(t->vocab_size() == 400);
  BOOST_TEST(t->token_to_id("<bos>").value() == 2);
  BOOST_TEST(t->token_to_id("<|turn>").value() == 4);
  BOOST_TEST(!t->token_to_id("not a piece"));
  BOOST_TEST(t->id_to_token(1).value() == "<eos>");
  std::ifstream in(fixture / "corpus.jsonl");
  BOOST_REQUIRE(in);
  std::size_t n = 0;
  for (std::string line; std::getline(in, line); ++n) {
    const auto j = nlohmann::json::parse(line);
    const std::string text = j.at("text").get<std::string>();
    const auto plain = t->encode(text, false);
    const auto with_bos = t->encode(text, true);
    BOOST_REQUIRE_MESSAGE(bool(plain) && bool(with_bos), "line " << n + 1);
    BOOST_TEST(plain.value() == j.at("ids").get<ids>(), "line " << n + 1 << ": " << text);
    BOOST_TEST(with_bos.value() == j.at("ids_with_special").get<ids>(), "line " << n + 1);
    BOOST_TEST(t->decode(plain.value(), false).value() == j.at("decoded").get<std::string>(), "line " << n + 1);
    BOOST_TEST(t->decode(plain.value(), true).value() == j.at("decoded_skip_special").get<std::string>(), "line " << n + 1);
    BOOST_TEST(t->decode(plain.value(), false).value() == text, "line " << n + 1 << ": decode(encode(x)) == x");
  }
  BOOST_TEST(n >= 15u);
}

BOOST_AUTO_TEST_CASE(tokenizer_json_is_preferred_and_tokenizer_config_decides_the_bos) {
  scratch s;
  fs::copy_file(fixture / "tokenizer.model", s.dir / "tokenizer.model");
  s.write("tokenizer_config.json", "{\"add_bos_token\": false}");
  auto t = tt::tokenizer::load_model(s.dir);
  BOOST_REQUIRE(bool(t));
  BOOST_TEST(t->encode("a", true).value() == ids{t->encode("a", false).value()});
  s.write("tokenizer_config.json", "{\"add_eos_token\": true}");
  t = tt::tokenizer::load_model(s.dir);
  BOOST_REQUIRE(bool(t));
  BOOST_TEST(t->encode("", true).value() == (ids{2, 1}));
  s.write("tokenizer_config.json", "{\"add_bos_token\": \"yes\"}");
  t = tt::tokenizer::load_model(s.dir);
  BOOST_REQUIRE(bool(!t));
  BOOST_TEST(t.error().message == (s.dir / "tokenizer_config.json").string() + ": \"add_bos_token\" must be true or false");
  fs::remove(s.dir / "tokenizer_config.json");
  fs::copy_file(fs::path(TANDEM_SOURCE_DIR) / "tests/data/tokenizer/tokenizer.json", s.dir / "tokenizer.json");
  t = tt::tokenizer::load_model(s.dir);
  BOOST_REQUIRE(bool(t));
  BOOST_TEST(t->format() == std::string("tokenizer.json"));
}

BOOST_AUTO_TEST_CASE(a_broken_model_a_missing_one_text_that_is_not_utf8_and_an_id_outside_the_vocabulary_are_refused) {
  scratch s;
  auto t = tt::tokenizer::load_model(s.dir);
  BOOST_REQUIRE(bool(!t));
  BOOST_TEST(t.error().message == s.dir.string() + " has neither tokenizer.json nor tokenizer.model");
  s.write("tokenizer.model", "this is not a protobuf");
  t = tt::tokenizer::load_model(s.dir);
  BOOST_REQUIRE(bool(!t));
  BOOST_TEST(t.error().message.rfind((s.dir / "tokenizer.model").string() + ": not a SentencePiece model: ", 0) == 0,
             t.error().message);
  const auto good = tt::tokenizer::load_model(fixture / "tokenizer.model");
  BOOST_REQUIRE(bool(good));
  const auto bad_text = good->encode("ok \xC3(", false);
  BOOST_REQUIRE(bool(!bad_text));
  BOOST_TEST(bad_text.error().message == "the text is not UTF-8: byte 3 (0xC3) starts no valid sequence");
  const auto bad_id = good->decode(ids{5, 400}, false);
  BOOST_REQUIRE(bool(!bad_id));
  BOOST_TEST(bad_id.error().message == "id 400 at position 1 is outside the vocabulary (400 ids)");
}

BOOST_AUTO_TEST_SUITE_END()
