// Where a configuration value came from, and the errors that point there.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace tandem::config {

/// A position in a recipe file (1-based line and column), or a command-line override.
struct source_location {
  std::string file;      ///< path as the user named it (parents: joined to the child's folder)
  int line = 0;          ///< 1-based; 0 when unknown
  int column = 0;        ///< 1-based; 0 when unknown
  int override_index = 0;  ///< >0: the n-th dotted command-line override; file holds its text

  bool is_override() const { return override_index > 0; }
  bool is_default() const { return file.empty() && override_index == 0; }

  /// "file:line:column", "override 2 'grpo.seed=3'" or "default".
  std::string to_string() const;
};

/// One problem with a recipe, located and naming the key path it concerns.
struct config_error {
  source_location where;
  std::string key;      ///< dotted key path ("grpo.num_prompts_per_step"), may be empty
  std::string message;  ///< what is wrong and, where possible, how to fix it

  /// "file:line:column: error: key: message" (the format every test asserts).
  std::string to_string() const;
};

using config_errors = std::vector<config_error>;

/// Errors a report prints; a recipe with more gets the first ones and a count of the rest.
inline constexpr std::size_t reported_errors = 50;

/// The errors, one per line, in the order given: the first `limit`, then one line counting the rest.
std::string to_string(const config_errors& errors, std::size_t limit = reported_errors);

}  // namespace tandem::config
