// `tandem validate --minimize`: the keys a recipe sets to exactly the value it would inherit, so
// recipes stay thin overrides of their parents.
#pragma once

#include <string>
#include <vector>

#include "orchestration/config/config_error.h"
#include "orchestration/config/config_value.h"
#include "orchestration/config/schema.h"

namespace tandem::config {

struct redundant_key {
  std::string key;
  config_value value;
  source_location at;              ///< where the recipe sets it
  source_location inherited_from;  ///< the parent value it repeats (is_default(): the schema default)

  /// "file:line:column: key: 42 repeats the value inherited from parent.yaml:3:5"
  std::string to_string() const;
};

struct minimize_result {
  std::vector<redundant_key> redundant;
  config_errors errors;  ///< the recipe could not be read; `redundant` is then empty
};

minimize_result find_redundant_keys(const std::string& path, const schema& s = schema::recipes());

}  // namespace tandem::config
