// Checking one YAML value against its key's declaration: type, null, range, choices, and values
// accepted by the schema whose feature is not built yet.
#pragma once

#include <optional>

#include <yaml-cpp/yaml.h>

#include "orchestration/config/config_error.h"
#include "orchestration/config/config_value.h"
#include "orchestration/config/schema.h"

namespace tandem::config {

/// The checked value, or nullopt after appending a located error to `errors`.
std::optional<config_value> check_value(const key_spec& spec, const YAML::Node& node,
                                        const source_location& where, config_errors& errors);

}  // namespace tandem::config
