// Gemma 4's built-in chat format (orchestration/data/chat_format.h) against transformers'
// apply_chat_template: every recorded rendering of tests/data/tokenizer/chat/renderings.jsonl
// (tools/reference/chat_format.py record, with Google's Gemma 4 template) comes out as the same
// text and, through the Gemma-shaped fixture tokenizer, the same ids; system turns, thinking on and
// off, with and without the generation prompt, thought channels in model turns, Unicode white
// space. The edge cases of stripping and every refusal are checked by hand.
#include "orchestration/data/chat_format.h"

#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "orchestration/tokenizer/tokenizer.h"

namespace fs = std::filesystem;
namespace td = tandem::data;

namespace {

const fs::path fixture = fs::path(TANDEM_SOURCE_DIR) / "tests/data/tokenizer";

std::vector<td::chat_message> messages_of(const nlohmann::json& j) {
  std::vector<td::chat_message> out;
  for (const auto& m : j) out.push_back({m.at("role").get<std::string>(), m.at("content").get<std::string>()});
  return out;
}

std::string refusal(const std::vector<td::chat_message>& m) {
  const auto r = td::render_chat(m, {});
  BOOST_REQUIRE_MESSAGE(!r, "the conversation was rendered");
  return r.error().message;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(chat_format_test)

BOOST_AUTO_TEST_CASE(every_recorded_conversation_renders_to_the_text_and_ids_of_transformers_apply_chat_template) {
  auto t = tandem::tokenizer::tokenizer::load(fixture / "tokenizer.json");
  BOOST_REQUIRE_MESSAGE(bool(t), (t ? std::string() : t.error().message));
  std::ifstream in(fixture / "chat/renderings.jsonl");
  BOOST_REQUIRE(in);
  std::size_t n = 0, thinking = 0, without_prompt = 0;
  for (std::string line; std::getline(in, line); ++n) {
    const auto j = nlohmann::json::parse(line);
    const td::chat_options o{j.at("add_generation_prompt").get<bool>(), j.at("enable_thinking").get<bool>()};
    thinking += o.enable_thinking;
    without_prompt += !o.add_generation_prompt;
    const auto text = td::render_chat(messages_of(j.at("messages")), o);
    BOOST_REQUIRE_MESSAGE(bool(text), "rendering " << n << ": " << (text ? "" : text.error().message));
    BOOST_TEST(text.value() == j.at("text").get<std::string>(), "rendering " << n);
    const auto ids = t->encode(text.value(), false);
    BOOST_REQUIRE_MESSAGE(bool(ids), "rendering " << n << ": " << (ids ? "" : ids.error().message));
    BOOST_TEST(ids.value() == j.at("ids").get<std::vector<std::int32_t>>(), "rendering " << n);
  }
  BOOST_TEST(n >= 30u);
  BOOST_TEST(thinking > 0u);
  BOOST_TEST(without_prompt > 0u);
}

BOOST_AUTO_TEST_CASE(the_generation_prompt_opens_the_model_turn_with_an_empty_thought_channel_unless_thinking_is_on) {
  const std::vector<td::chat_message> m{{"user", "hi"}};
  BOOST_TEST(td::render_chat(m, {true, false}).value() ==
             "<bos><|turn>user\nhi<turn|>\n<|turn>model\n<|channel>thought\n<channel|>");
  BOOST_TEST(td::render_chat(m, {true, true}).value() ==
             "<bos><|turn>system\n<|think|>\n<turn|>\n<|turn>user\nhi<turn|>\n<|turn>model\n");
  BOOST_TEST(td::render_chat(m, {false, false}).value() == "<bos><|turn>user\nhi<turn|>\n");
  BOOST_TEST(td::chat_tokens({true, false}).size() == 5u);
  BOOST_TEST(td::chat_tokens({true, true}).back() == "<|think|>");
}

BOOST_AUTO_TEST_CASE(stripping_removes_python_white_space_and_model_turns_lose_their_thought_channels) {
  BOOST_TEST(td::python_strip("\xC2\xA0\xE3\x80\x80 a b\t\n\x1c") == "a b");  // NBSP, ideographic space
  BOOST_TEST(td::python_strip("\xE2\x80\x8B" "a") == "\xE2\x80\x8B" "a");    // U+200B is not white space
  BOOST_TEST(td::python_strip("") == "");
  BOOST_TEST(td::python_strip(" \xFF ") == "\xFF");  // a malformed byte is kept for the tokenizer to refuse
  BOOST_TEST(td::without_thoughts("a<|channel>x<channel|>b<|channel>y<channel|> c ") == "ab c");
  BOOST_TEST(td::without_thoughts("answer<|channel>never closed") == "answer");
  BOOST_TEST(td::without_thoughts("tail<channel|>after") == "tailafter");
  BOOST_TEST(td::without_thoughts("  plain  ") == "plain");
}

BOOST_AUTO_TEST_CASE(an_empty_conversation_an_unknown_role_or_a_late_system_message_is_refused_naming_the_message) {
  BOOST_TEST(refusal({}) == "a conversation needs at least one message");
  BOOST_TEST(refusal({{"user", "a"}, {"tool", "b"}}) ==
             "messages[1].role must be system, user, assistant or model, got \"tool\"");
  BOOST_TEST(refusal({{"user", "a"}, {"system", "b"}}) == "messages[1]: a system message must come first");
}

BOOST_AUTO_TEST_SUITE_END()
