// A small fluent builder used by schema.cpp to declare keys in one line each:
//   key(s, "grpo.seed", "Seed of every random stream").integer(42).at_least(0)
//       .to([](recipe_config& r) -> auto& { return r.grpo.seed; });
#pragma once

#include <optional>
#include <exception>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "orchestration/config/schema.h"

namespace tandem::config::internal {

template <class T> struct is_optional : std::false_type {};
template <class T> struct is_optional<std::optional<T>> : std::true_type {};

/// Copies a checked value into a typed field (int64 -> double widening for reals).
template <class T>
void assign(T& field, const config_value& v) {
  if constexpr (is_optional<T>::value) {
    if (std::holds_alternative<std::monostate>(v)) {
      field.reset();
    } else {
      typename T::value_type inner{};
      assign(inner, v);
      field = std::move(inner);
    }
  } else if constexpr (std::is_same_v<T, double>) {
    field = std::holds_alternative<std::int64_t>(v) ? static_cast<double>(std::get<std::int64_t>(v))
                                                   : std::get<double>(v);
  } else {
    field = std::get<T>(v);
  }
}

class key_builder {
 public:
  key_builder(schema& s, std::string path, std::string description) : schema_(s) {
    spec_.path = std::move(path);
    spec_.description = std::move(description);
  }
  key_builder(const key_builder&) = delete;
  key_builder& operator=(const key_builder&) = delete;
  ~key_builder() {
    if (!spec_.store) std::terminate();  // a key declared without a binding is a schema bug
    schema_.add(std::move(spec_));
  }

  key_builder& boolean(bool def) { return kind(value_kind::boolean, def); }
  key_builder& integer(std::int64_t def) { return kind(value_kind::integer, def); }
  key_builder& real(double def) { return kind(value_kind::real, def); }
  key_builder& string(std::string def) { return kind(value_kind::string, std::move(def)); }
  key_builder& integer_list() { return kind(value_kind::integer_list, std::vector<std::int64_t>{}); }
  /// A key with no default value: null unless set (implies nullable).
  key_builder& null_default() {
    spec_.nullable = true;
    spec_.default_value = std::monostate{};
    return *this;
  }
  key_builder& nullable() { spec_.nullable = true; return *this; }
  key_builder& required() { spec_.required = true; return *this; }
  key_builder& at_least(double v) { spec_.min = v; spec_.min_exclusive = false; return *this; }
  key_builder& above(double v) { spec_.min = v; spec_.min_exclusive = true; return *this; }
  key_builder& at_most(double v) { spec_.max = v; spec_.max_exclusive = false; return *this; }
  key_builder& below(double v) { spec_.max = v; spec_.max_exclusive = true; return *this; }
  /// The test that shows the key's effect ("tests/FILE.cpp: case"; several joined by "; ").
  key_builder& shown_by(std::string tests) {
    spec_.shown_by = std::move(tests);
    return *this;
  }
  /// Any value but `off` asks for something not built (`example` is one such value, as YAML);
  /// `get(const recipe_config&)` reads the typed field.
  template <class F, class T>
  key_builder& not_built_unless(F get, T off, std::string example, std::string reason) {
    spec_.unbuilt = key_spec::unbuilt_rule{[get, off](const recipe_config& r) { return !(get(r) == off); },
                                           std::move(example), std::move(reason)};
    return *this;
  }
  /// A rule over the whole recipe (a cross-field condition), with an example value of this key.
  key_builder& not_built_when(std::function<bool(const recipe_config&)> fires, std::string example, std::string reason) {
    spec_.unbuilt = key_spec::unbuilt_rule{std::move(fires), std::move(example), std::move(reason)};
    return *this;
  }
  /// Configures the switch `key` only; takes effect when it does.
  key_builder& part_of(std::string key) {
    spec_.part_of = std::move(key);
    return *this;
  }
  /// Configures the Gemma 4 engines only; the fake engines ignore it.
  key_builder& fake_ignores() {
    spec_.fake_ignores = true;
    return *this;
  }
  /// Configures the fake engines only; the Gemma 4 engines ignore it.
  key_builder& gemma4_ignores() {
    spec_.gemma4_ignores = true;
    return *this;
  }

  /// Binds the key to a field: `accessor(recipe_config&)` returns a reference to it.
  template <class F>
  key_builder& to(F accessor) {
    spec_.store = [accessor](recipe_config& r, const config_value& v) { assign(accessor(r), v); };
    return *this;
  }

  /// A choice among named enum values, bound to an enum field.
  template <class E, class F>
  key_builder& choice(std::vector<std::pair<std::string, E>> table, std::string def, F accessor) {
    spec_.kind = value_kind::choice;
    for (const auto& [text, value] : table) spec_.choices.push_back(text);
    spec_.default_value = std::move(def);
    spec_.store = [table, accessor](recipe_config& r, const config_value& v) {
      const auto& text = std::get<std::string>(v);
      for (const auto& [name, value] : table)
        if (name == text) accessor(r) = value;
    };
    return *this;
  }

 private:
  key_builder& kind(value_kind k, config_value def) {
    spec_.kind = k;
    spec_.default_value = std::move(def);
    return *this;
  }

  schema& schema_;
  key_spec spec_;
};

inline key_builder key(schema& s, std::string path, std::string description) {
  return key_builder(s, std::move(path), std::move(description));
}

}  // namespace tandem::config::internal
