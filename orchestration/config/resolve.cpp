// Merging layers over defaults, checking every value, storing into the typed recipe.
#include "orchestration/config/resolve.h"

#include <algorithm>

#include "orchestration/config/rules.h"
#include "orchestration/config/value_check.h"

namespace tandem::config {
namespace {

/// Where to point at for a key that is missing: its innermost section opened in the recipe's own
/// file, else the top of that file.
source_location missing_key_location(const std::string& key, const recipe_layer* top, const std::string& file) {
  if (top) {
    std::string section = key;
    while (section.find('.') != std::string::npos) {
      section = section.substr(0, section.rfind('.'));
      if (auto it = top->sections.find(section); it != top->sections.end()) return it->second;
    }
  }
  return source_location{file, 1, 1, 0};
}

void sort_errors(config_errors& errors) {
  std::stable_sort(errors.begin(), errors.end(), [](const config_error& a, const config_error& b) {
    const auto& x = a.where;
    const auto& y = b.where;
    if (x.is_override() != y.is_override()) return !x.is_override();
    if (x.override_index != y.override_index) return x.override_index < y.override_index;
    if (x.file != y.file) return x.file < y.file;
    if (x.line != y.line) return x.line < y.line;
    return x.column < y.column;
  });
}

}  // namespace

resolution merge_layers(const std::vector<recipe_layer>& layers, const schema& s, const std::string& top_file) {
  resolution out;
  resolved_recipe r;
  r.file = top_file;
  const recipe_layer* top = nullptr;
  for (const auto& l : layers) {
    if (!l.file.empty() && std::find(r.files.begin(), r.files.end(), l.file) == r.files.end())
      r.files.push_back(l.file);
    if (l.file == top_file) top = &l;
  }
  if (top) r.sections = top->sections;

  for (const auto& spec : s.keys()) {
    std::optional<origin_value> chosen;
    if (!spec.required) chosen = origin_value{spec.default_value, source_location{}};
    for (const auto& layer : layers) {
      auto it = layer.entries.find(spec.path);
      if (it == layer.entries.end()) continue;
      // Every value written anywhere is checked, even one a child overrides later.
      if (auto v = check_value(spec, it->second.value, it->second.value_at, out.errors))
        chosen = origin_value{*v, it->second.value_at};
    }
    if (!chosen) {
      const bool written = std::any_of(layers.begin(), layers.end(),
                                       [&](const recipe_layer& l) { return l.entries.count(spec.path) > 0; });
      if (!written)
        out.errors.push_back({missing_key_location(spec.path, top, top_file), spec.path,
                              "required key is missing; set it in the recipe or on the command line (" +
                                  spec.path + "=...)"});
      continue;
    }
    spec.store(r.config, chosen->value);
    r.values.emplace(spec.path, std::move(*chosen));
  }
  sort_errors(out.errors);
  if (out.errors.empty()) out.recipe = std::move(r);
  return out;
}

namespace {

/// Merges a loaded chain with the overrides, checks values and rules.
resolution resolve_chain(recipe_chain chain, const std::string& path, const std::vector<std::string>& overrides,
                         const schema& s) {
  config_errors errors = std::move(chain.errors);
  if (!chain.complete) {  // later checks would only echo the broken file or parent
    sort_errors(errors);
    return resolution{std::nullopt, std::move(errors)};
  }
  chain.layers.push_back(parse_overrides(overrides, s, errors));
  resolution out = merge_layers(chain.layers, s, path);
  errors.insert(errors.end(), out.errors.begin(), out.errors.end());
  if (errors.empty() && out.recipe) {
    errors = check_rules(*out.recipe);
  }
  sort_errors(errors);
  out.errors = std::move(errors);
  if (!out.errors.empty()) out.recipe.reset();
  return out;
}

}  // namespace

resolution resolve_recipe(const std::string& path, const std::vector<std::string>& overrides, const schema& s) {
  return resolve_chain(load_recipe_chain(path, s), path, overrides, s);
}

resolution resolve_resolved_text(const std::string& text, const std::string& display, const schema& s) {
  return resolve_chain(load_resolved_text(text, display, s), display, {}, s);
}

}  // namespace tandem::config
