// The native tokenizer.json reader (orchestration/tokenizer/tokenizer.h) against the ids that
// transformers' tokenizer gave for a committed corpus (tests/data/tokenizer/, written by
// tools/reference/make_tokenizer_fixture.py with a tokenizer in the shape of Gemma's): unicode,
// whitespace runs, digits, emoji, special-token text and unseen scripts (byte fallback) encode to
// the same ids, with and without the <bos> template, decode to the same text, and decode(encode(x))
// is x. Each component's edge cases and every refusal are checked on small hand-written files.
#include "orchestration/tokenizer/tokenizer.h"

#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace fs = std::filesystem;
namespace tt = tandem::tokenizer;
using ids = std::vector<std::int32_t>;

namespace {

const fs::path fixture = fs::path(TANDEM_SOURCE_DIR) / "tests/data/tokenizer";

const tt::tokenizer& gemma_shaped() {
  static const tt::tokenizer t = [] {
    auto r = tt::tokenizer::load(fixture / "tokenizer.json");
    if (!r) BOOST_FAIL(r.error().message);
    return r.value();
  }();
  return t;
}

std::vector<nlohmann::json> corpus() {
  std::vector<nlohmann::json> out;
  std::ifstream in(fixture / "corpus.jsonl");
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

/// A tokenizer.json with a vocabulary of single characters and the given merges, normalizer,
/// pre-tokenizer, decoder and added tokens (JSON texts).
std::string small_json(const std::string& vocab, const std::string& merges, const std::string& extra = "",
                       const std::string& model_extra = "") {
  return R"({"version": "1.0", "added_tokens": [], )" + extra + R"("model": {"type": "BPE", "vocab": )" + vocab +
         R"(, "merges": )" + merges + model_extra + "}}";
}

tt::tokenizer parsed(const std::string& json) {
  auto r = tt::tokenizer::parse(json, "test.json");
  if (!r) BOOST_FAIL(r.error().message);
  return r.value();
}

std::string refusal(const std::string& json) {
  auto r = tt::tokenizer::parse(json, "test.json");
  BOOST_REQUIRE_MESSAGE(!r, "the tokenizer was accepted");
  return r.error().message;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(tokenizer_test)

BOOST_AUTO_TEST_CASE(every_corpus_line_encodes_to_the_ids_transformers_gave_and_decodes_to_its_text) {
  const auto lines = corpus();
  BOOST_REQUIRE_GE(lines.size(), 20u);
  const tt::tokenizer& t = gemma_shaped();
  for (const auto& line : lines) {
    const std::string text = line["text"];
    BOOST_TEST_CONTEXT("text " << line["text"].dump()) {
      const auto plain = t.encode(text);
      BOOST_REQUIRE_MESSAGE(plain, (plain ? "" : plain.error().message));
      BOOST_TEST(plain.value() == line["ids"].get<ids>(), boost::test_tools::per_element());
      const auto with_bos = t.encode(text, true);
      BOOST_REQUIRE(with_bos);
      BOOST_TEST(with_bos.value() == line["ids_with_special"].get<ids>(), boost::test_tools::per_element());
      const auto decoded = t.decode(plain.value());
      BOOST_REQUIRE(decoded);
      BOOST_TEST(decoded.value() == line["decoded"].get<std::string>());
      BOOST_TEST(decoded.value() == text);  // decode(encode(x)) == x
    }
  }
}

BOOST_AUTO_TEST_CASE(special_tokens_are_matched_in_text_and_left_out_of_decode_when_asked) {
  const tt::tokenizer& t = gemma_shaped();
  const auto turn = t.token_to_id("<|turn>"), end = t.token_to_id("<turn|>");
  BOOST_REQUIRE(turn && end);
  const auto e = t.encode("<|turn>user\nHi<turn|>");
  BOOST_REQUIRE(e);
  BOOST_TEST(e.value().front() == *turn);
  BOOST_TEST(e.value().back() == *end);
  BOOST_TEST(t.decode(e.value(), true).value() == "user\nHi");
  BOOST_TEST(t.decode(e.value(), false).value() == "<|turn>user\nHi<turn|>");
}

BOOST_AUTO_TEST_CASE(text_that_is_not_utf8_and_ids_outside_the_vocabulary_are_refused_by_position) {
  const tt::tokenizer& t = gemma_shaped();
  const auto bad = t.encode(std::string("ok\xC3(", 4));
  BOOST_REQUIRE(!bad);
  BOOST_TEST((bad.error().code == tt::tokenizer_errc::invalid_input));
  BOOST_TEST(bad.error().message == "the text is not UTF-8: byte 2 (0xC3) starts no valid sequence");
  BOOST_TEST(!t.encode("\xED\xA0\x80"));  // a surrogate
  BOOST_TEST(!t.encode("\xC0\xAF"));      // an overlong form
  const ids out_of_range{2, t.vocab_size()};
  const auto d = t.decode(out_of_range);
  BOOST_REQUIRE(!d);
  BOOST_TEST((d.error().code == tt::tokenizer_errc::unknown_id));
  BOOST_TEST(d.error().message == "id " + std::to_string(t.vocab_size()) + " at position 1 is in neither the vocabulary nor the added tokens (" +
                                      std::to_string(t.vocab_size()) + " ids)");
}

BOOST_AUTO_TEST_CASE(merges_apply_lowest_rank_first_and_leftmost_among_equal_ranks) {
  // "aaa": the pair (a, a) occurs at 0 and 1; the leftmost merges first, leaving "aa" "a".
  const auto t = parsed(small_json(R"({"a": 0, "b": 1, "aa": 2, "ab": 3, "aab": 4})", R"([["a", "a"], ["a", "b"], ["aa", "b"]])"));
  BOOST_TEST(t.encode("aaa").value() == (ids{2, 0}), boost::test_tools::per_element());
  // "aab": (a, a) has rank 0, (a, b) rank 1: aa then aab.
  BOOST_TEST(t.encode("aab").value() == (ids{4}), boost::test_tools::per_element());
  // The older "left right" spelling of merges reads the same.
  const auto old = parsed(small_json(R"({"a": 0, "b": 1, "aa": 2, "ab": 3, "aab": 4})", R"(["a a", "a b", "aa b"])"));
  BOOST_TEST(old.encode("aab").value() == (ids{4}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(uncovered_characters_fall_back_to_bytes_then_to_a_fused_unknown_token_then_fail) {
  std::string bytes;
  for (int b = 0; b < 256; ++b) {
    char name[16];
    std::snprintf(name, sizeof name, ", \"<0x%02X>\": %d", b, 10 + b);
    bytes += name;
  }
  const auto with_bytes = parsed(small_json(R"({"a": 0, "<unk>": 1)" + bytes + "}", "[]", "",
                                            R"(, "unk_token": "<unk>", "byte_fallback": true, "fuse_unk": true)"));
  BOOST_TEST(with_bytes.encode("a\xC3\xA9").value() == (ids{0, 10 + 0xC3, 10 + 0xA9}), boost::test_tools::per_element());
  BOOST_TEST(with_bytes.decode(ids{0, 10 + 0xC3, 10 + 0xA9}).value() == "a <0xC3> <0xA9>");  // no decoder: the tokens, space-separated
  const auto fused = parsed(small_json(R"({"a": 0, "<unk>": 1})", "[]", "", R"(, "unk_token": "<unk>", "fuse_unk": true)"));
  BOOST_TEST(fused.encode("xya").value() == (ids{1, 0}), boost::test_tools::per_element());
  const auto unfused = parsed(small_json(R"({"a": 0, "<unk>": 1})", "[]", "", R"(, "unk_token": "<unk>", "fuse_unk": false)"));
  BOOST_TEST(unfused.encode("xya").value() == (ids{1, 1, 0}), boost::test_tools::per_element());
  const auto none = parsed(small_json(R"({"a": 0})", "[]"));
  const auto e = none.encode("ax");
  BOOST_REQUIRE(!e);
  BOOST_TEST(e.error().message == "the character \"x\" at byte 1 of \"ax\" has no token, no byte tokens and no unknown token");
}

BOOST_AUTO_TEST_CASE(split_behaviours_cut_the_text_as_the_library_does) {
  const std::string vocab = R"({"a": 0, "b": 1, "-": 2, "a-": 3, "-b": 4, "--": 5})";
  const auto with = [&](const std::string& behavior) {
    return parsed(small_json(vocab, R"([["a", "-"], ["-", "b"], ["-", "-"]])",
                             R"("pre_tokenizer": {"type": "Split", "pattern": {"String": "-"}, "behavior": ")" + behavior +
                                 R"(", "invert": false}, )"));
  };
  // "a--b": pieces a | - | - | b.
  BOOST_TEST(with("Removed").encode("a--b").value() == (ids{0, 1}), boost::test_tools::per_element());
  BOOST_TEST(with("Isolated").encode("a--b").value() == (ids{0, 2, 2, 1}), boost::test_tools::per_element());
  BOOST_TEST(with("MergedWithPrevious").encode("a--b").value() == (ids{3, 2, 1}), boost::test_tools::per_element());
  BOOST_TEST(with("MergedWithNext").encode("a--b").value() == (ids{0, 2, 4}), boost::test_tools::per_element());
  BOOST_TEST(with("Contiguous").encode("a--b").value() == (ids{0, 5, 1}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(normalizer_steps_run_in_order_and_prepend_only_before_text) {
  const auto t = parsed(small_json(
      R"({"_": 0, "a": 1, "b": 2, "_a": 3})", R"([["_", "a"]])",
      R"("normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "_"}, {"type": "Replace", "pattern": {"String": " "}, "content": "_"}]}, )"));
  BOOST_TEST(t.encode("a b").value() == (ids{3, 0, 2}), boost::test_tools::per_element());
  BOOST_TEST(t.encode("").value().empty());
}

BOOST_AUTO_TEST_CASE(the_decoder_steps_replace_fall_back_to_bytes_fuse_and_strip) {
  const auto t = parsed(small_json(
      R"({"_": 0, "a": 1, "<0xC3>": 2, "<0xA9>": 3, "<0xFF>": 4})", "[]",
      R"("decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "_"}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}, )"));
  BOOST_TEST(t.decode(ids{0, 1, 2, 3, 0, 1}).value() == "a\xC3\xA9 a");  // the leading space stripped
  BOOST_TEST(t.decode(ids{1, 4, 1}).value() == "a\xEF\xBF\xBD" "a");      // a byte that is not UTF-8 becomes U+FFFD
}

BOOST_AUTO_TEST_CASE(components_tandem_does_not_implement_are_refused_by_name) {
  BOOST_TEST(refusal(small_json(R"({"a": 0})", "[]", R"("normalizer": {"type": "NFKC"}, )")) ==
             "test.json: normalizer: the normalizer NFKC is not built in tandem's tokenizer");
  BOOST_TEST(refusal(small_json(R"({"a": 0})", "[]",
                                R"("pre_tokenizer": {"type": "Split", "pattern": {"Regex": "\\s+"}, "behavior": "Isolated", "invert": false}, )")) ==
             "test.json: pre_tokenizer.pattern: a Regex pattern is not built in tandem's tokenizer");
  BOOST_TEST(refusal(R"({"model": {"type": "WordPiece", "vocab": {}}})") ==
             "test.json: model: the model WordPiece is not built in tandem's tokenizer");
  BOOST_TEST(refusal(R"({"added_tokens": [{"id": 0, "content": "x", "special": true, "normalized": false, "lstrip": true}], "model": {"type": "BPE", "vocab": {"x": 0}, "merges": []}})") ==
             "test.json: added_tokens[0].lstrip: an added token with lstrip is not built in tandem's tokenizer");
  BOOST_TEST(refusal(small_json(R"({"a": 0})", "[]", "", R"(, "dropout": 0.1)")) ==
             "test.json: model.dropout: BPE dropout is not built in tandem's tokenizer");
}

BOOST_AUTO_TEST_CASE(a_malformed_file_is_refused_naming_the_key) {
  BOOST_TEST(refusal(small_json(R"({"a": 0, "b": 1})", R"([["a", "b"]])")) ==
             "test.json: model.merges[0]: \"ab\" is not in model.vocab");
  BOOST_TEST(refusal(small_json(R"({"a": -1})", "[]")) == "test.json: model.vocab[\"a\"]: an id must be in [0, 2^31), got -1");
  BOOST_TEST(refusal(small_json(R"({"a": 0})", R"(["a"])")) ==
             "test.json: model.merges[0]: a merge string must be two tokens and one space, got \"a\"");
  BOOST_TEST(refusal(R"({"model": {"type": "BPE", "vocab": {}}})") == "test.json: model: the key \"merges\" is missing");
  BOOST_TEST(refusal(small_json(R"({"a": 0})", "[]", "", R"(, "unk_token": "<unk>")")) ==
             "test.json: model.unk_token \"<unk>\" is not in model.vocab");
  const auto missing = tt::tokenizer::load(fixture / "no-such-tokenizer.json");
  BOOST_REQUIRE(!missing);
  BOOST_TEST(missing.error().message.ends_with("no-such-tokenizer.json: cannot be read"));
  BOOST_TEST(refusal("{not json").starts_with("test.json: not JSON: "));
}

BOOST_AUTO_TEST_SUITE_END()
