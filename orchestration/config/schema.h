// The recipe schema: every key a recipe may set, with its type, default, allowed range, a one-line
// description and where its value lands in recipe_config. Declared once, in schema.cpp.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "orchestration/config/config_value.h"
#include "orchestration/config/recipe.h"

namespace tandem::config {

enum class value_kind { boolean, integer, real, string, choice, integer_list, real_list, string_list };

/// "an integer", "a list of reals", ... (for error messages).
const char* describe(value_kind kind);

struct key_spec {
  std::string path;                  ///< dotted key path
  value_kind kind = value_kind::string;
  bool nullable = false;             ///< null is a valid value
  bool required = false;             ///< no default: some layer must set it
  config_value default_value;        ///< used when no layer sets the key (ignored if required)
  std::optional<double> min, max;    ///< numeric bounds (integers and reals, list items too)
  bool min_exclusive = false, max_exclusive = false;
  std::vector<std::string> choices;  ///< valid texts of a choice key
  /// Values accepted by the schema whose feature is not built: refused with this reason.
  std::optional<config_value> only_value;
  std::string not_implemented_reason;
  std::string description;
  std::function<void(recipe_config&, const config_value&)> store;
};

/// All keys, in declaration order (which is also the order `tandem validate` prints them).
class schema {
 public:
  /// The tandem recipe schema.
  static const schema& recipes();

  const std::vector<key_spec>& keys() const { return keys_; }
  const key_spec* find(std::string_view path) const;
  /// True when `path` names a section ("policy.generation"), i.e. a prefix of some key.
  bool is_section(std::string_view path) const;
  /// Direct children (key names and section names) of a section; "" is the root.
  std::vector<std::string> children(std::string_view section) const;

  void add(key_spec spec) { keys_.push_back(std::move(spec)); }

 private:
  std::vector<key_spec> keys_;
};

}  // namespace tandem::config
