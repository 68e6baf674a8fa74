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
  std::string description;
  /// Where the key's effect is shown: "tests/FILE.cpp: case_name" (several joined by "; "). Every key
  /// either takes effect (and names its test), turns on something not built (`unbuilt`), or belongs
  /// to a switch that does (`part_of`). The schema walk test holds every key to one of the three.
  std::string shown_by;
  /// A value well-formed but asking for something this build cannot run: `tandem validate` notes
  /// it, `tandem run` and `--dry-run` refuse it.
  struct unbuilt_rule {
    std::function<bool(const recipe_config&)> fires;  ///< true: the recipe asks for it
    std::string example;                              ///< a value (YAML) that makes it fire
    std::string reason;                               ///< "dynamic sampling is not built yet"
  };
  std::optional<unbuilt_rule> unbuilt;
  /// The switch key (with an `unbuilt` rule) this key only configures: it takes effect with it.
  std::string part_of;
  /// Configures the Gemma 4 engines only: runtime.engine: fake ignores it (a fake run says so).
  bool fake_ignores = false;
  /// Configures the fake engines only: runtime.engine: gemma4 ignores it (a gemma4 run says so).
  bool gemma4_ignores = false;
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
