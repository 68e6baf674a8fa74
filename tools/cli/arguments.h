// Splitting a subcommand's arguments: into flags, the recipe path and key=value overrides (the
// recipe commands), or into options and positional arguments (the others).
#pragma once

#include <cstddef>
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

/// Options of the commands that take no recipe (`inspect`, `convert`, `metrics`, `plot`): `--name
/// value` or `--name=value` (`-o FILE`, `-o=FILE` alike) for the names in `valued`, bare `--name`
/// for those in `flags`; names in `repeatable` take a value each time they are given, in order.
/// An argument that starts with '-' (but is not "-") is an option; unknown options, a missing
/// value, an option given twice and more or fewer positional arguments than the command takes are
/// problems.
struct option_spec {
  std::set<std::string> valued;
  std::set<std::string> flags;
  std::set<std::string> repeatable;
  /// How many positional arguments the command takes (none: each is a problem), and what the
  /// usage calls one: "unexpected argument 'x' (one RUN_DIR)", "missing RUN_DIR".
  std::size_t positional = 0;
  std::string positional_name;
  /// Whether a problem lists the options ("unknown option '-x' (options: -o)"); a command that
  /// prints its usage line after the problem need not.
  bool list_options = true;
};
struct parsed_options {
  std::map<std::string, std::string> values;  ///< "--model" -> "DIR"
  std::set<std::string> flags;                ///< "--json"
  std::map<std::string, std::vector<std::string>> repeated;  ///< "--stop" -> {"1", "106"}
  std::vector<std::string> positional;        ///< in order, option_spec::positional of them
  std::string problem;                        ///< non-empty: a usage error to print
};
parsed_options parse_options(const std::vector<std::string>& a, const option_spec& spec);
/// The same without positional arguments.
parsed_options parse_options(const std::vector<std::string>& a, const std::set<std::string>& valued,
                             const std::set<std::string>& flags, const std::set<std::string>& repeatable = {});
/// The spec of a command over one positional argument and the options in `valued` whose usage
/// line follows a problem (`tandem metrics export RUN_DIR [-o FILE]`, `tandem plot`).
option_spec one_positional(std::string name, std::set<std::string> valued);

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
