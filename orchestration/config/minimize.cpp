// Comparing a recipe's own values with what its parents and the schema defaults give.
#include "orchestration/config/minimize.h"

#include <optional>

#include "orchestration/config/recipe_layer.h"
#include "orchestration/config/value_check.h"

namespace tandem::config {

std::string redundant_key::to_string() const {
  return at.to_string() + ": " + key + ": " + to_yaml(value) + " repeats the value inherited from " +
         (inherited_from.is_default() ? std::string("the schema default") : inherited_from.to_string());
}

minimize_result find_redundant_keys(const std::string& path, const schema& s) {
  minimize_result out;
  recipe_chain chain = load_recipe_chain(path, s);
  out.errors = std::move(chain.errors);
  if (!out.errors.empty()) return out;
  const recipe_layer& own = chain.layers.back();  // the recipe itself is loaded last
  for (const auto& spec : s.keys()) {
    auto mine = own.entries.find(spec.path);
    if (mine == own.entries.end()) continue;
    std::optional<config_value> inherited;
    source_location from;
    if (!spec.required) inherited = spec.default_value;
    for (std::size_t i = 0; i + 1 < chain.layers.size(); ++i) {
      auto it = chain.layers[i].entries.find(spec.path);
      if (it == chain.layers[i].entries.end()) continue;
      if (auto v = check_value(spec, it->second.value, it->second.value_at, out.errors)) {
        inherited = *v;
        from = it->second.value_at;
      }
    }
    auto value = check_value(spec, mine->second.value, mine->second.value_at, out.errors);
    if (value && inherited && *value == *inherited)
      out.redundant.push_back({spec.path, *value, mine->second.key_at, from});
  }
  if (!out.errors.empty()) out.redundant.clear();
  return out;
}

}  // namespace tandem::config
