// Rendering of locations and configuration errors.
#include "orchestration/config/config_error.h"

namespace tandem::config {

std::string source_location::to_string() const {
  if (is_override()) {
    return "override " + std::to_string(override_index) + " '" + file + "'";
  }
  if (file.empty()) return "default";
  std::string out = file;
  if (line > 0) {
    out += ":" + std::to_string(line);
    if (column > 0) out += ":" + std::to_string(column);
  }
  return out;
}

std::string config_error::to_string() const {
  std::string out = where.to_string() + ": error: ";
  if (!key.empty()) out += key + ": ";
  out += message;
  return out;
}

std::string to_string(const config_errors& errors, std::size_t limit) {
  std::string out;
  for (std::size_t i = 0; i < errors.size() && i < limit; ++i) {
    out += errors[i].to_string();
    out += '\n';
  }
  if (errors.size() > limit)
    out += "... and " + std::to_string(errors.size() - limit) + " more errors (" + std::to_string(errors.size()) +
           " in all; fix these first)\n";
  return out;
}

}  // namespace tandem::config
