// Prompt datasets in JSON lines (prompt_dataset.h).
#include "orchestration/data/prompt_dataset.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace tandem::data {
namespace {

using json = nlohmann::json;

/// Thrown inside this file only: the sentence after "FILE:LINE: ".
struct bad_record {
  std::string what;
};

std::string described(const json& j) {
  std::string s = j.dump();
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return std::string(j.type_name()) + " " + s;
}

std::string string_field(const json& j, const std::string& name) {
  if (!j.is_string()) throw bad_record{"\"" + name + "\" must be a string, got " + described(j)};
  return j.get<std::string>();
}

prompt_record record_of(const json& j) {
  if (!j.is_object()) throw bad_record{"a record must be a JSON object, got " + described(j)};
  prompt_record r;
  int forms = 0;
  if (const auto it = j.find("prompt"); it != j.end()) {
    ++forms;
    r.prompt = string_field(*it, "prompt");
    if (r.prompt->empty()) throw bad_record{"\"prompt\" is empty"};
  }
  if (const auto it = j.find("messages"); it != j.end()) {
    ++forms;
    if (!it->is_array() || it->empty()) throw bad_record{"\"messages\" must be a non-empty list of {role, content}, got " + described(*it)};
    for (std::size_t i = 0; i < it->size(); ++i) {
      const json& m = (*it)[i];
      const std::string at = "messages[" + std::to_string(i) + "]";
      if (!m.is_object() || !m.contains("role") || !m.contains("content"))
        throw bad_record{at + " must be {\"role\": ..., \"content\": ...}, got " + described(m)};
      r.messages.push_back({string_field(m["role"], at + ".role"), string_field(m["content"], at + ".content")});
    }
    if (auto problem = conversation_problem(r.messages)) throw bad_record{std::move(*problem)};
    const std::string& last = r.messages.back().role;
    if (last == "assistant" || last == "model")
      throw bad_record{"the last message is the model's (" + last + "); a prompt ends with the user's turn"};
  }
  if (const auto it = j.find("input_ids"); it != j.end()) {
    ++forms;
    if (!it->is_array() || it->empty()) throw bad_record{"\"input_ids\" must be a non-empty list of token ids, got " + described(*it)};
    std::vector<std::int32_t> ids;
    for (std::size_t i = 0; i < it->size(); ++i) {
      const json& x = (*it)[i];
      if (!x.is_number_integer() || x.get<std::int64_t>() < 0 || x.get<std::int64_t>() > INT32_MAX)
        throw bad_record{"input_ids[" + std::to_string(i) + "] must be a token id (an integer in [0, 2^31)), got " + described(x)};
      ids.push_back(x.get<std::int32_t>());
    }
    r.input_ids = std::move(ids);
  }
  if (forms == 0) throw bad_record{"the record has none of \"prompt\", \"messages\" and \"input_ids\""};
  if (forms > 1) throw bad_record{"the record has more than one of \"prompt\", \"messages\" and \"input_ids\"; give one"};
  const auto answer = j.find("answer");
  if (answer == j.end()) throw bad_record{"the record has no \"answer\""};
  r.answer = string_field(*answer, "answer");
  return r;
}

bool blank(std::string_view line) {
  for (const char c : line)
    if (c != ' ' && c != '\t' && c != '\r') return false;
  return true;
}

}  // namespace

std::optional<std::string> conversation_problem(std::span<const chat_message> messages) {
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    const std::string at = "messages[" + std::to_string(i) + "]";
    if (role != "system" && role != "user" && role != "assistant" && role != "model")
      return at + ".role must be system, user, assistant or model, got \"" + role + "\"";
    if (role == "system" && i != 0) return at + ": a system message must come first";
  }
  return std::nullopt;
}

data_result<std::vector<prompt_record>> parse_prompt_dataset(std::string_view text, const std::string& where) {
  std::vector<prompt_record> out;
  std::size_t line_no = 0;
  for (std::size_t begin = 0; begin < text.size();) {
    const std::size_t nl = text.find('\n', begin);
    std::string_view line = text.substr(begin, (nl == std::string_view::npos ? text.size() : nl) - begin);
    begin = nl == std::string_view::npos ? text.size() : nl + 1;
    ++line_no;
    if (line_no == 1 && line.starts_with("\xEF\xBB\xBF")) line.remove_prefix(3);
    if (blank(line)) continue;
    const std::string at = where + ":" + std::to_string(line_no) + ": ";
    json j;
    try {
      j = json::parse(line);
    } catch (const json::parse_error& e) {
      std::string why = e.what();
      if (const auto p = why.find("parse error"); p != std::string::npos) why = why.substr(p);
      return data_error{at + "not a JSON record: " + why};
    }
    try {
      prompt_record r = record_of(j);
      r.line = line_no;
      out.push_back(std::move(r));
    } catch (const bad_record& b) {
      return data_error{at + b.what};
    }
  }
  if (out.empty()) return data_error{where + ": no records (a prompt dataset is JSON lines, one record per line)"};
  return out;
}

data_result<std::vector<prompt_record>> read_prompt_dataset(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return data_error{file.string() + ": cannot be read"};
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return data_error{file.string() + ": reading it failed"};
  return parse_prompt_dataset(text.str(), file.string());
}

}  // namespace tandem::data
