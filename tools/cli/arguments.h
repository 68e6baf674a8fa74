// Splitting a subcommand's arguments into flags, the recipe path and key=value overrides.
#pragma once

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

}  // namespace tandem::cli
