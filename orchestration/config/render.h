// Text renderings of recipes: the resolved configuration (valid YAML, each value commented with
// where it came from) and the documented schema.
#pragma once

#include <string>

#include "orchestration/config/resolve.h"
#include "orchestration/config/schema.h"

namespace tandem::config {

/// The resolved recipe as YAML; a trailing comment names the file:line:column or override that
/// set each non-default value. Feeding the output back as a recipe gives the same configuration.
std::string render_resolved(const resolved_recipe& r, const schema& s = schema::recipes());

/// Every key with its default, type, range and description, as commented YAML.
std::string render_schema(const schema& s = schema::recipes());

}  // namespace tandem::config
