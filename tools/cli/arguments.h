// Splitting a subcommand's arguments into flags, the recipe path and key=value overrides.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
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
struct parsed_options {
  std::map<std::string, std::string> values;  ///< "--model" -> "DIR"
  std::set<std::string> flags;                ///< "--json"
  std::string problem;                        ///< non-empty: a usage error to print
};
parsed_options parse_options(const std::vector<std::string>& a, const std::set<std::string>& valued,
                             const std::set<std::string>& flags);

/// "5GB" (5e9), "500MB", "2GiB", "1048576": a byte count; nullopt when malformed or not positive.
std::optional<long long> parse_byte_size(const std::string& text);

}  // namespace tandem::cli
