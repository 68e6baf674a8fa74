// `tandem tokenize --model DIR [--special] | --decode [--skip-special] | --chat [--thinking]
// [--no-generation-prompt] [--text]`: stdin's text as a JSON list of token ids, a JSON list of ids
// on stdin as text, or a conversation on stdin (a JSON list of {role, content}, or an object with
// "messages") in Gemma 4's chat format, as ids or (--text) as the rendered text. DIR is a
// checkpoint directory (its tokenizer.json, else its tokenizer.model) or the tokenizer file.
#include <filesystem>
#include <iostream>
#include <iterator>
#include <sstream>

#include <nlohmann/json.hpp>

#include "orchestration/data/chat_format.h"
#include "orchestration/tokenizer/tokenizer.h"
#include "tools/cli/arguments.h"
#include "tools/cli/commands.h"

namespace tandem::cli {
namespace {

/// The conversation on stdin: a list of {role, content}, or {"messages": [...]}.
std::optional<std::vector<data::chat_message>> conversation(const std::string& input, std::ostream& err) {
  try {
    auto j = nlohmann::json::parse(input);
    if (j.is_object() && j.contains("messages")) j = j["messages"];
    if (!j.is_array()) throw std::invalid_argument("expected a JSON list of {\"role\", \"content\"} messages");
    std::vector<data::chat_message> out;
    for (std::size_t i = 0; i < j.size(); ++i) {
      const auto& m = j[i];
      if (!m.is_object() || !m.contains("role") || !m.contains("content") || !m["role"].is_string() ||
          !m["content"].is_string())
        throw std::invalid_argument("messages[" + std::to_string(i) + "] must be {\"role\": string, \"content\": string}, got " +
                                    m.dump());
      out.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
    }
    return out;
  } catch (const std::exception& e) {
    err << "tandem tokenize --chat: stdin: " << e.what() << "\n";
    return std::nullopt;
  }
}

}  // namespace

int tokenize_command(const args& a, std::istream& in, std::ostream& out, std::ostream& err) {
  const parsed_options p = parse_options(a, {"--model"}, {"--decode", "--special", "--skip-special", "--chat", "--thinking",
                                                          "--no-generation-prompt", "--text"});
  if (!p.problem.empty()) {
    err << "tandem tokenize: " << p.problem << "\n";
    return exit_usage;
  }
  if (!p.values.count("--model")) {
    err << "tandem tokenize: missing --model (see `tandem help tokenize`)\n";
    return exit_usage;
  }
  const bool decode = p.flags.count("--decode") > 0;
  const bool chat = p.flags.count("--chat") > 0;
  if (decode && p.flags.count("--special")) {
    err << "tandem tokenize: --special adds tokens when encoding; with --decode, --skip-special leaves them out\n";
    return exit_usage;
  }
  if (!decode && p.flags.count("--skip-special")) {
    err << "tandem tokenize: --skip-special applies to --decode\n";
    return exit_usage;
  }
  if (chat && (decode || p.flags.count("--special"))) {
    err << "tandem tokenize: --chat encodes a conversation (its rendering holds its own <bos>); it takes neither --decode "
           "nor --special\n";
    return exit_usage;
  }
  for (const char* f : {"--thinking", "--no-generation-prompt", "--text"})
    if (!chat && p.flags.count(f)) {
      err << "tandem tokenize: " << f << " applies to --chat\n";
      return exit_usage;
    }
  const auto t = tokenizer::tokenizer::load_model(p.values.at("--model"));
  if (!t) {
    err << "tandem tokenize: --model: " << t.error().message << "\n";
    return exit_refused;
  }
  const std::string input((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (chat) {
    const auto messages = conversation(input, err);
    if (!messages) return exit_refused;
    const data::chat_options o{p.flags.count("--no-generation-prompt") == 0, p.flags.count("--thinking") > 0};
    if (p.flags.count("--text")) {
      const auto text = data::render_chat(*messages, o);
      if (!text) {
        err << "tandem tokenize --chat: stdin: " << text.error().message << "\n";
        return exit_refused;
      }
      out << text.value();
      return exit_ok;
    }
    if (auto problem = data::chat_token_problem(*t, o)) {
      err << "tandem tokenize --chat: --model: " << *problem << "\n";
      return exit_refused;
    }
    const auto ids = data::chat_ids(*t, *messages, o);
    if (!ids) {
      err << "tandem tokenize --chat: stdin: " << ids.error().message << "\n";
      return exit_refused;
    }
    out << nlohmann::json(ids.value()).dump() << "\n";
    return exit_ok;
  }
  if (!decode) {
    const auto ids = t->encode(input, p.flags.count("--special") > 0);
    if (!ids) {
      err << "tandem tokenize: stdin: " << ids.error().message << "\n";
      return exit_refused;
    }
    out << nlohmann::json(ids.value()).dump() << "\n";
    return exit_ok;
  }
  std::vector<std::int32_t> ids;
  try {
    const auto j = nlohmann::json::parse(input);
    if (!j.is_array()) throw std::invalid_argument("expected a JSON list of ids");
    for (std::size_t i = 0; i < j.size(); ++i) {
      if (!j[i].is_number_integer() || j[i].get<std::int64_t>() < INT32_MIN || j[i].get<std::int64_t>() > INT32_MAX)
        throw std::invalid_argument("item " + std::to_string(i) + " is not a 32-bit integer id: " + j[i].dump());
      ids.push_back(j[i].get<std::int32_t>());
    }
  } catch (const std::exception& e) {
    err << "tandem tokenize --decode: stdin: " << e.what() << "\n";
    return exit_refused;
  }
  const auto text = t->decode(ids, p.flags.count("--skip-special") > 0);
  if (!text) {
    err << "tandem tokenize --decode: stdin: " << text.error().message << "\n";
    return exit_refused;
  }
  out << text.value();
  return exit_ok;
}

}  // namespace tandem::cli
