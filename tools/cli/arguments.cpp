// Argument splitting shared by the subcommands.
#include "tools/cli/arguments.h"

#include <exception>
#include <map>

namespace tandem::cli {

parsed_args parse_args(const std::vector<std::string>& a, const std::set<std::string>& known) {
  parsed_args p;
  for (const auto& s : a) {
    if (s.starts_with("--")) {
      if (!known.count(s)) {
        std::string list;
        for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
        p.problem = "unknown option '" + s + "'" + (list.empty() ? "" : " (options: " + list + ")");
        return p;
      }
      p.flags.insert(s);
    } else if (s.find('=') != std::string::npos) {
      p.overrides.push_back(s);
    } else if (!p.recipe) {
      p.recipe = s;
    } else {
      p.problem = "unexpected argument '" + s + "' (overrides are written key.path=value)";
      return p;
    }
  }
  return p;
}

parsed_options parse_options(const std::vector<std::string>& a, const std::set<std::string>& valued,
                             const std::set<std::string>& flags, const std::set<std::string>& repeatable) {
  parsed_options p;
  auto known = [&] {
    std::string list;
    for (const auto* set : {&valued, &flags, &repeatable})
      for (const auto& k : *set) list += (list.empty() ? "" : ", ") + k;
    return list;
  };
  for (std::size_t i = 0; i < a.size(); ++i) {
    std::string name = a[i], value;
    const bool inline_value = name.starts_with("--") && name.find('=') != std::string::npos;
    if (inline_value) {
      value = name.substr(name.find('=') + 1);
      name = name.substr(0, name.find('='));
    }
    if (!name.starts_with("--")) {
      p.problem = "unexpected argument '" + name + "' (options: " + known() + ")";
      return p;
    }
    if (flags.count(name) && !inline_value) {
      p.flags.insert(name);
      continue;
    }
    if (!valued.count(name) && !repeatable.count(name)) {
      p.problem = "unknown option '" + name + "' (options: " + known() + ")";
      return p;
    }
    if (!inline_value) {
      if (i + 1 == a.size()) {
        p.problem = "option " + name + " needs a value";
        return p;
      }
      value = a[++i];
    }
    if (repeatable.count(name)) {
      p.repeated[name].push_back(value);
      continue;
    }
    if (!p.values.emplace(name, value).second) {
      p.problem = "option " + name + " given twice";
      return p;
    }
  }
  return p;
}

std::optional<long long> parse_integer(const std::string& text) {
  try {
    std::size_t used = 0;
    const long long v = std::stoll(text, &used);
    if (used == text.size()) return v;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

std::optional<double> parse_real(const std::string& text) {
  try {
    std::size_t used = 0;
    const double v = std::stod(text, &used);
    if (used == text.size()) return v;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

std::optional<long long> parse_byte_size(const std::string& text) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0 || digits > 15) return std::nullopt;
  const long long n = std::stoll(text.substr(0, digits));
  const std::string unit = text.substr(digits);
  static const std::map<std::string, long long> units{
      {"", 1},           {"B", 1},           {"kB", 1000LL},        {"KB", 1000LL},       {"MB", 1000000LL},
      {"GB", 1000000000LL}, {"TB", 1000000000000LL}, {"KiB", 1LL << 10}, {"MiB", 1LL << 20}, {"GiB", 1LL << 30},
      {"TiB", 1LL << 40}};
  const auto u = units.find(unit);
  if (u == units.end() || n <= 0 || n > (1LL << 62) / u->second) return std::nullopt;
  return n * u->second;
}

}  // namespace tandem::cli
