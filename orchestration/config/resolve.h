// Resolving a recipe: parents, the recipe itself and command-line overrides merged key by key over
// the schema defaults, every value checked, then the cross-field rules.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "orchestration/config/config_error.h"
#include "orchestration/config/config_value.h"
#include "orchestration/config/recipe.h"
#include "orchestration/config/recipe_layer.h"
#include "orchestration/config/schema.h"

namespace tandem::config {

/// A value with the place that set it (is_default() for schema defaults).
struct origin_value {
  config_value value;
  source_location origin;
};

struct resolved_recipe {
  std::string file;                                  ///< the recipe as named by the user
  std::vector<std::string> files;                    ///< every file read, parents first
  std::map<std::string, origin_value> values;        ///< every schema key
  std::map<std::string, source_location> sections;   ///< sections opened in the recipe's own file
  recipe_config config;                              ///< the same values, typed

  /// Where `key` was set (or default).
  const source_location& origin(const std::string& key) const { return values.at(key).origin; }
};

struct resolution {
  std::optional<resolved_recipe> recipe;  ///< set when errors is empty
  config_errors errors;                   ///< sorted by file, line, column
};

/// Merges checked layers over the schema defaults; checks required keys against `top`.
/// Does not apply the cross-field rules.
resolution merge_layers(const std::vector<recipe_layer>& layers, const schema& s, const std::string& top_file);

/// Reads, merges, checks and applies the cross-field rules (rules.h).
resolution resolve_recipe(const std::string& path, const std::vector<std::string>& overrides = {},
                          const schema& s = schema::recipes());

/// The same for the text of a resolved recipe (load_resolved_text), e.g. the one a member receives
/// in its welcome; `display` names it in errors ("the controller's recipe").
resolution resolve_resolved_text(const std::string& text, const std::string& display,
                                 const schema& s = schema::recipes());

}  // namespace tandem::config
