// YAML rendering of checked values.
#include "orchestration/config/config_value.h"

#include <charconv>
#include <cmath>
#include <yaml-cpp/yaml.h>

namespace tandem::config {
namespace {

std::string real_text(double v) {
  // Shortest text that reads back to the same double, always recognisable as a real.
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, end);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

std::string string_text(const std::string& s) {
  YAML::Emitter e;
  e << s;
  return e.c_str();
}

template <class T, class F>
std::string list_text(const std::vector<T>& items, F item_text) {
  std::string out = "[";
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    out += item_text(items[i]);
  }
  return out + "]";
}

}  // namespace

std::string to_yaml(const config_value& value) {
  struct visitor {
    std::string operator()(std::monostate) const { return "null"; }
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(std::int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const { return real_text(d); }
    std::string operator()(const std::string& s) const { return string_text(s); }
    std::string operator()(const std::vector<std::int64_t>& v) const {
      return list_text(v, [](std::int64_t i) { return std::to_string(i); });
    }
    std::string operator()(const std::vector<double>& v) const { return list_text(v, real_text); }
    std::string operator()(const std::vector<std::string>& v) const {
      return list_text(v, string_text);
    }
  };
  return std::visit(visitor{}, value);
}

}  // namespace tandem::config
