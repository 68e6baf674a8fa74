// Reading recipe files into layers: one layer per file (or per set of command-line overrides),
// each a map from dotted key path to the YAML value written there and its location. Unknown keys,
// duplicate keys and malformed sections are reported here, against the schema, with positions.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "orchestration/config/config_error.h"
#include "orchestration/config/schema.h"

namespace tandem::config {

struct layer_entry {
  YAML::Node value;
  source_location key_at;    ///< where the key is written
  source_location value_at;  ///< where its value starts (the key's position for an empty value)
};

struct recipe_layer {
  std::string file;                            ///< as displayed in messages; empty for overrides
  std::map<std::string, layer_entry> entries;  ///< key path -> value
  std::map<std::string, source_location> sections;  ///< section path -> where it is opened
};

/// The layers of a recipe in merge order (a parent's layers before its child's; parents in the
/// order `defaults:` lists them), the recipe's own layer last.
struct recipe_chain {
  std::vector<recipe_layer> layers;
  config_errors errors;
  bool complete = true;  ///< false when a file could not be read or parsed, or `defaults` failed
};

/// Reads `path` and, recursively, the parents named by its `defaults:` key.
recipe_chain load_recipe_chain(const std::string& path, const schema& s);

/// One layer from the text of a resolved recipe (render_resolved: every key, no `defaults:`), as a
/// controller sends it to its members; `display` names it in errors.
recipe_chain load_resolved_text(const std::string& text, const std::string& display, const schema& s);

/// Parses dotted overrides ("grpo.seed=3", "policy.generation={temperature: 0.7}") into one layer.
recipe_layer parse_overrides(const std::vector<std::string>& overrides, const schema& s,
                             config_errors& errors);

}  // namespace tandem::config
