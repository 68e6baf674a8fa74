// Argument splitting shared by the subcommands.
#include "tools/cli/arguments.h"

#include <exception>
#include <map>
#include <utility>

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

parsed_options parse_options(const std::vector<std::string>& a, const option_spec& spec) {
  parsed_options p;
  const auto known = [&] {
    if (!spec.list_options) return std::string();
    std::string list;
    for (const auto* set : {&spec.valued, &spec.flags, &spec.repeatable})
      for (const auto& k : *set) list += (list.empty() ? "" : ", ") + k;
    return " (options: " + list + ")";
  };
  const auto takes = [&] {  // " (one RUN_DIR)"; the options for a command that takes no positional argument
    if (spec.positional == 0) return known();
    return " (" + (spec.positional == 1 ? std::string("one") : std::to_string(spec.positional)) + " " +
           spec.positional_name + ")";
  };
  for (std::size_t i = 0; i < a.size(); ++i) {
    std::string name = a[i], value;
    if (!name.starts_with("-") || name == "-") {
      if (p.positional.size() == spec.positional) {
        p.problem = "unexpected argument '" + name + "'" + takes();
        return p;
      }
      p.positional.push_back(name);
      continue;
    }
    const bool inline_value = name.find('=') != std::string::npos;
    if (inline_value) {
      value = name.substr(name.find('=') + 1);
      name = name.substr(0, name.find('='));
    }
    if (spec.flags.count(name) && !inline_value) {
      p.flags.insert(name);
      continue;
    }
    if (!spec.valued.count(name) && !spec.repeatable.count(name)) {
      p.problem = "unknown option '" + name + "'" + known();
      return p;
    }
    if (!inline_value) {
      if (i + 1 == a.size()) {
        p.problem = "option " + name + " needs a value";
        return p;
      }
      value = a[++i];
    }
    if (spec.repeatable.count(name)) {
      p.repeated[name].push_back(value);
      continue;
    }
    if (!p.values.emplace(name, value).second) {
      p.problem = "option " + name + " given twice";
      return p;
    }
  }
  if (p.positional.size() < spec.positional) p.problem = "missing " + spec.positional_name;
  return p;
}

option_spec one_positional(std::string name, std::set<std::string> valued) {
  option_spec spec;
  spec.valued = std::move(valued);
  spec.positional = 1;
  spec.positional_name = std::move(name);
  spec.list_options = false;
  return spec;
}

parsed_options parse_options(const std::vector<std::string>& a, const std::set<std::string>& valued,
                             const std::set<std::string>& flags, const std::set<std::string>& repeatable) {
  option_spec spec;
  spec.valued = valued;
  spec.flags = flags;
  spec.repeatable = repeatable;
  return parse_options(a, spec);
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
