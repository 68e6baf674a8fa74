// Settings this build cannot run yet (not_built.h).
#include "orchestration/config/not_built.h"

#include <filesystem>
#include <system_error>

#include "orchestration/config/resolve.h"

namespace tandem::config {
namespace {

/// Where a value was set; a default is located at the recipe itself.
source_location located(const resolved_recipe& r, const origin_value& v) {
  if (!v.origin.is_default()) return v.origin;
  return source_location{r.file, 0, 0, 0};
}

std::string value_text(const origin_value& v) {
  return to_yaml(v.value) + (v.origin.is_default() ? " (the default)" : "");
}

}  // namespace

config_errors unbuilt_settings(const resolved_recipe& r) {
  config_errors out;
  for (const key_spec& k : schema::recipes().keys()) {
    if (!k.unbuilt || !k.unbuilt->fires(r.config)) continue;
    const origin_value& v = r.values.at(k.path);
    out.push_back({located(r, v), k.path, value_text(v) + ": " + k.unbuilt->reason});
  }
  return out;
}

config_errors engine_ignored_settings(const resolved_recipe& r) {
  config_errors out;
  const bool fake = r.config.runtime.engine == engine_kind::fake;
  for (const key_spec& k : schema::recipes().keys()) {
    const origin_value& v = r.values.at(k.path);
    if (!(fake ? k.fake_ignores : k.gemma4_ignores) || v.origin.is_default()) continue;
    out.push_back({v.origin, k.path,
                   to_yaml(v.value) + (fake ? " configures the Gemma 4 engines; runtime.engine: fake ignores it"
                                            : " configures the fake engines; runtime.engine: gemma4 ignores it")});
  }
  return out;
}

std::string to_notes(const config_errors& notes) {
  std::string out;
  for (const auto& n : notes) {
    out += n.where.to_string() + ": note: ";
    if (!n.key.empty()) out += n.key + ": ";
    out += n.message + "\n";
  }
  return out;
}

config_errors missing_data_files(const resolved_recipe& r) {
  config_errors out;
  for (const char* key : {"data.train_dataset", "data.validation_dataset"}) {
    const origin_value& v = r.values.at(key);
    const auto* path = std::get_if<std::string>(&v.value);
    if (!path) continue;
    std::error_code ec;
    const auto status = std::filesystem::status(*path, ec);
    if (!std::filesystem::exists(status))
      out.push_back({located(r, v), key, *path + ": no such file (relative paths are from the directory tandem runs in)"});
    else if (std::filesystem::is_directory(status))
      out.push_back({located(r, v), key, *path + ": a directory, not a dataset file"});
  }
  return out;
}

}  // namespace tandem::config
