// Strict JSON parsing through nlohmann's parser callback: a stack of the keys seen in each open
// object catches duplicates, the callback's depth bounds nesting.
#include "gpu/model/json_text.h"

#include <fstream>
#include <set>
#include <sstream>
#include <vector>

namespace tandem::gpu {

result<std::string> read_text_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return status(status_code::io_error, file.string() + ": cannot open for reading");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return status(status_code::io_error, file.string() + ": read failed");
  return text.str();
}
namespace {

using json = nlohmann::json;

// Thrown from the callback to abandon the parse; caught in parse_json_strict.
struct strict_error {
  std::string what;
};

// One open object or array of the document being parsed.
struct frame {
  bool is_object = false;
  std::set<std::string> keys;  // keys seen so far (objects)
  std::string key;             // the key whose value is being parsed (objects)
};

std::string path_of(const std::vector<frame>& stack) {
  std::string path;
  for (const frame& f : stack) {
    if (!f.is_object) {
      path += "[]";
    } else if (!f.key.empty()) {
      path += (path.empty() ? "" : ".") + f.key;
    }
  }
  return path;
}

// Line and column (both from 1) of the byte nlohmann's parse_error points at (its `byte` counts
// the characters read, so the offending one is byte - 1).
std::pair<std::size_t, std::size_t> line_column(std::string_view text, std::size_t byte) {
  const std::size_t at = byte == 0 ? 0 : std::min(byte - 1, text.size());
  std::size_t line = 1;
  std::size_t line_start = 0;
  for (std::size_t i = 0; i < at; ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  return {line, at - line_start + 1};
}

// "invalid JSON at line 3, column 21: syntax error while parsing ...", the reason taken from
// nlohmann's message without its own prefix.
std::string describe_parse_error(std::string_view text, const json::parse_error& e) {
  const auto [line, column] = line_column(text, e.byte);
  std::string reason = e.what();
  if (auto c = reason.find("column "); c != std::string::npos) {
    if (auto colon = reason.find(": ", c); colon != std::string::npos) reason = reason.substr(colon + 2);
  } else if (auto p = reason.find("parse error: "); p != std::string::npos) {
    reason = reason.substr(p + 13);
  }
  return "invalid JSON at line " + std::to_string(line) + ", column " + std::to_string(column) + ": " + reason;
}

}  // namespace

std::string quote_name(std::string_view text, std::size_t max_chars) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out = "'";
  std::size_t n = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (n++ == max_chars) {
      out += "...";
      break;
    }
    const auto c = static_cast<unsigned char>(ch);
    const auto next = i + 1 < text.size() ? static_cast<unsigned char>(text[i + 1]) : 0;
    if (c == 0xc2 && next >= 0x80 && next <= 0x9f) {  // a C1 control character (U+0080..U+009F) in UTF-8
      out += "\\u00";
      out += hex[next >> 4];
      out += hex[next & 15];
      ++i;
    } else if (c == '\'' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += ch;
    }
  }
  return out + "'";
}

result<nlohmann::json> parse_json_strict(std::string_view text, const std::string& source, int max_depth) {
  std::vector<frame> stack;
  auto callback = [&](int depth, json::parse_event_t event, json& parsed) -> bool {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (depth >= max_depth) {
          throw strict_error{"JSON nested deeper than " + std::to_string(max_depth) + " levels at " +
                             (stack.empty() ? std::string("the top") : quote_name(path_of(stack)))};
        }
        stack.push_back(frame{event == json::parse_event_t::object_start, {}, {}});
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        if (!stack.empty()) stack.pop_back();
        break;
      case json::parse_event_t::key: {
        frame& f = stack.back();
        f.key = parsed.get<std::string>();
        if (!f.keys.insert(f.key).second) throw strict_error{"duplicate key " + quote_name(path_of(stack))};
        break;
      }
      case json::parse_event_t::value:
        break;
    }
    return true;
  };
  // JSON never holds a raw NUL (strings escape control characters), and nlohmann's lexer would
  // take one as the end of the input and ignore what follows.
  if (const auto nul = text.find('\0'); nul != std::string_view::npos) {
    const auto [line, column] = line_column(text, nul + 1);
    return status(status_code::invalid_argument, source + ": invalid JSON at line " + std::to_string(line) + ", column " +
                                                     std::to_string(column) + ": a NUL byte");
  }
  try {
    return json::parse(text.begin(), text.end(), callback);
  } catch (const strict_error& e) {
    return status(status_code::invalid_argument, source + ": " + e.what);
  } catch (const json::parse_error& e) {
    return status(status_code::invalid_argument, source + ": " + describe_parse_error(text, e));
  } catch (const std::exception& e) {
    return status(status_code::invalid_argument, source + ": invalid JSON: " + e.what());
  }
}

}  // namespace tandem::gpu
