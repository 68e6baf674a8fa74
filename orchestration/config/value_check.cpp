// Conversion of YAML scalars to typed values, strictly: "1e6" is not an integer, "yes" is not a
// boolean, a quoted "3" is not a number, and null is refused unless the key allows it.
#include "orchestration/config/value_check.h"

#include <charconv>
#include <cmath>
#include <regex>

#include "orchestration/config/suggest.h"

namespace tandem::config {
namespace {

/// Why a scalar text is not of the wanted kind ("" when it is).
struct parsed {
  config_value value;
  std::string problem;
};

bool is_plain(const YAML::Node& n) { return n.Tag() == "?"; }

std::string quoted(const std::string& s) { return "'" + s + "'"; }

std::string shape(const YAML::Node& n) {
  if (n.IsMap()) return "a mapping";
  if (n.IsSequence()) return "a list";
  if (!is_plain(n)) return "the quoted string " + quoted(n.Scalar());
  return quoted(n.Scalar());
}

bool looks_real(const std::string& t) {
  static const std::regex re(R"([-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?)");
  return std::regex_match(t, re);
}

parsed parse_integer(const YAML::Node& n) {
  const std::string& t = n.Scalar();
  static const std::regex re(R"([-+]?\d+)");
  if (!is_plain(n) || !std::regex_match(t, re)) {
    std::string why = "expected an integer, got " + shape(n);
    if (is_plain(n) && looks_real(t)) why += " (a floating-point number; write it out, e.g. 1000000)";
    return {{}, why};
  }
  std::int64_t v = 0;
  const char* b = t.data() + (t[0] == '+' ? 1 : 0);
  auto [p, ec] = std::from_chars(b, t.data() + t.size(), v);
  if (ec != std::errc() || p != t.data() + t.size()) return {{}, "integer " + t + " is out of the 64-bit range"};
  return {v, ""};
}

parsed parse_real(const YAML::Node& n) {
  const std::string& t = n.Scalar();
  if (!is_plain(n) || !looks_real(t)) return {{}, "expected a number, got " + shape(n)};
  double v = 0;
  auto [p, ec] = std::from_chars(t.data() + (t[0] == '+' ? 1 : 0), t.data() + t.size(), v);
  if (ec != std::errc() || p != t.data() + t.size() || !std::isfinite(v))
    return {{}, "number " + t + " is out of range"};
  return {v, ""};
}

parsed parse_bool(const YAML::Node& n) {
  const std::string& t = n.Scalar();
  if (is_plain(n) && (t == "true" || t == "True" || t == "TRUE")) return {true, ""};
  if (is_plain(n) && (t == "false" || t == "False" || t == "FALSE")) return {false, ""};
  return {{}, "expected true or false, got " + shape(n)};
}

std::string bound_text(double v, value_kind kind) {
  if (kind == value_kind::integer || kind == value_kind::integer_list)
    return std::to_string(static_cast<std::int64_t>(v));
  return to_yaml(config_value{v});
}

/// "" if within the key's bounds, else what the bound is.
std::string range_problem(const key_spec& spec, double v, const std::string& text) {
  if (spec.min && (spec.min_exclusive ? !(v > *spec.min) : !(v >= *spec.min)))
    return "must be " + std::string(spec.min_exclusive ? "> " : ">= ") + bound_text(*spec.min, spec.kind) +
           ", got " + text;
  if (spec.max && (spec.max_exclusive ? !(v < *spec.max) : !(v <= *spec.max)))
    return "must be " + std::string(spec.max_exclusive ? "< " : "<= ") + bound_text(*spec.max, spec.kind) +
           ", got " + text;
  return "";
}

parsed parse_scalar(const key_spec& spec, const YAML::Node& n, value_kind kind) {
  if (!n.IsScalar()) {
    if (n.IsNull()) return {{}, "null is not allowed in a list"};
    return {{}, std::string("expected ") + describe(kind) + ", got " + shape(n)};
  }
  parsed p;
  switch (kind) {
    case value_kind::boolean: return parse_bool(n);
    case value_kind::integer:
    case value_kind::integer_list: p = parse_integer(n); break;
    case value_kind::real:
    case value_kind::real_list: p = parse_real(n); break;
    case value_kind::string:
    case value_kind::string_list: return {n.Scalar(), ""};
    case value_kind::choice: {
      const std::string& t = n.Scalar();
      for (const auto& c : spec.choices)
        if (c == t) return {t, ""};
      std::string list;
      for (const auto& c : spec.choices) list += (list.empty() ? "" : ", ") + c;
      std::string why = "expected one of " + list + "; got " + quoted(t);
      if (auto near = nearest(t, spec.choices)) why += " (did you mean '" + *near + "'?)";
      return {{}, why};
    }
  }
  if (!p.problem.empty()) return p;
  const double v = std::holds_alternative<std::int64_t>(p.value)
                       ? static_cast<double>(std::get<std::int64_t>(p.value))
                       : std::get<double>(p.value);
  p.problem = range_problem(spec, v, n.Scalar());
  return p;
}

value_kind item_kind(value_kind list) {
  switch (list) {
    case value_kind::integer_list: return value_kind::integer;
    case value_kind::real_list: return value_kind::real;
    default: return value_kind::string;
  }
}

parsed parse_list(const key_spec& spec, const YAML::Node& n) {
  if (!n.IsSequence()) return {{}, std::string("expected ") + describe(spec.kind) + ", got " + shape(n)};
  std::vector<std::int64_t> ints;
  std::vector<double> reals;
  std::vector<std::string> strings;
  for (std::size_t i = 0; i < n.size(); ++i) {
    parsed item = parse_scalar(spec, n[i], item_kind(spec.kind));
    if (!item.problem.empty()) return {{}, "item " + std::to_string(i) + ": " + item.problem};
    if (auto* v = std::get_if<std::int64_t>(&item.value)) ints.push_back(*v);
    if (auto* v = std::get_if<double>(&item.value)) reals.push_back(*v);
    if (auto* v = std::get_if<std::string>(&item.value)) strings.push_back(*v);
  }
  if (spec.kind == value_kind::integer_list) return {ints, ""};
  if (spec.kind == value_kind::real_list) return {reals, ""};
  return {strings, ""};
}

}  // namespace

std::optional<config_value> check_value(const key_spec& spec, const YAML::Node& node,
                                        const source_location& where, config_errors& errors) {
  if (node.IsNull()) {
    if (spec.nullable) return config_value{std::monostate{}};
    errors.push_back({where, spec.path, spec.required ? "null is not allowed: this key is required"
                                                      : std::string("null is not allowed; expected ") +
                                                            describe(spec.kind)});
    return std::nullopt;
  }
  const bool is_list = spec.kind == value_kind::integer_list || spec.kind == value_kind::real_list ||
                       spec.kind == value_kind::string_list;
  parsed p = is_list ? parse_list(spec, node) : parse_scalar(spec, node, spec.kind);
  if (!p.problem.empty()) {
    errors.push_back({where, spec.path, p.problem});
    return std::nullopt;
  }
  return p.value;
}

}  // namespace tandem::config
