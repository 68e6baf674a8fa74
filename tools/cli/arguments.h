// Splitting a subcommand's arguments into flags, the recipe path and key=value overrides.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

namespace tandem::cli {

struct parsed_args {
  std::set<std::string> flags;          ///< "--dry-run", "--minimize", ...
  std::optional<std::string> recipe;    ///< the first argument without '=' that is not a flag
  std::vector<std::string> overrides;   ///< "key.path=value"
  std::string problem;                  ///< non-empty: a usage error to print
};

/// `known` lists the flags the subcommand accepts.
parsed_args parse_args(const std::vector<std::string>& a, const std::set<std::string>& known);

/// Options of the commands that take no recipe (`inspect`, `convert`): `--name value` or
/// `--name=value` for the names in `valued`, bare `--name` for those in `flags`. Positional
/// arguments, unknown options, a missing value and an option given twice are problems.
/// Names in `repeatable` take a value each time they are given, in order.
struct parsed_options {
  std::map<std::string, std::string> values;  ///< "--model" -> "DIR"
  std::set<std::string> flags;                ///< "--json"
  std::map<std::string, std::vector<std::string>> repeated;  ///< "--stop" -> {"1", "106"}
  std::string problem;                        ///< non-empty: a usage error to print
};
parsed_options parse_options(const std::vector<std::string>& a, const std::set<std::string>& valued,
                             const std::set<std::string>& flags, const std::set<std::string>& repeatable = {});

/// `text` as a whole number or a real; nullopt when it is not one (trailing characters included).
std::optional<long long> parse_integer(const std::string& text);
std::optional<double> parse_real(const std::string& text);

/// The value of option `name` as a T (an integer or a real type): nullopt when absent; when it is
/// not a number, nullopt with `problem` set to "option NAME: 'TEXT' is not a number".
template <class T>
std::optional<T> number_option(const parsed_options& p, const std::string& name, std::string& problem) {
  auto it = p.values.find(name);
  if (it == p.values.end()) return std::nullopt;
  if constexpr (std::is_integral_v<T>) {
    if (auto v = parse_integer(it->second)) return static_cast<T>(*v);
  } else {
    if (auto v = parse_real(it->second)) return static_cast<T>(*v);
  }
  problem = "option " + name + ": '" + it->second + "' is not a number";
  return std::nullopt;
}

/// "5GB" (5e9), "500MB", "2GiB", "1048576": a byte count; nullopt when malformed or not positive.
std::optional<long long> parse_byte_size(const std::string& text);

}  // namespace tandem::cli
