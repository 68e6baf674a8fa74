// Rendering of the resolved configuration and of the schema as nested YAML.
#include "orchestration/config/render.h"

#include <functional>
#include <map>
#include <vector>

namespace tandem::config {
namespace {

/// Keys grouped into nested sections, in order of first appearance in the schema.
struct section_tree {
  std::vector<std::string> order;                  // child names
  std::map<std::string, section_tree> sections;    // child sections
  std::map<std::string, const key_spec*> keys;     // child keys

  void insert(const key_spec& k, std::size_t from = 0) {
    const auto dot = k.path.find('.', from);
    const std::string name = k.path.substr(from, dot == std::string::npos ? std::string::npos : dot - from);
    if (!sections.count(name) && !keys.count(name)) order.push_back(name);
    if (dot == std::string::npos) keys[name] = &k;
    else sections[name].insert(k, dot + 1);
  }
};

section_tree tree_of(const schema& s) {
  section_tree t;
  for (const auto& k : s.keys()) t.insert(k);
  return t;
}

using leaf_text = std::function<std::pair<std::string, std::string>(const key_spec&)>;  // value, comment

void render(const section_tree& t, int depth, const leaf_text& leaf, std::string& out) {
  const std::string indent(static_cast<std::size_t>(depth) * 2, ' ');
  for (const auto& name : t.order) {
    if (auto k = t.keys.find(name); k != t.keys.end()) {
      auto [value, comment] = leaf(*k->second);
      std::string line = indent + name + ": " + value;
      if (!comment.empty()) {
        if (line.size() < 48) line.resize(48, ' ');
        line += "  # " + comment;
      }
      out += line + "\n";
    } else {
      out += indent + name + ":\n";
      render(t.sections.at(name), depth + 1, leaf, out);
    }
  }
}

std::string range_text(const key_spec& k) {
  std::string r;
  auto num = [&](double v) {
    return k.kind == value_kind::integer || k.kind == value_kind::integer_list
               ? std::to_string(static_cast<long long>(v))
               : to_yaml(config_value{v});
  };
  if (k.min) r += (k.min_exclusive ? " > " : " >= ") + num(*k.min);
  if (k.max) r += std::string(r.empty() ? "" : ",") + (k.max_exclusive ? " < " : " <= ") + num(*k.max);
  return r;
}

std::string type_text(const key_spec& k) {
  if (k.kind == value_kind::choice) {
    std::string c;
    for (const auto& x : k.choices) c += (c.empty() ? "" : "|") + x;
    return c;
  }
  switch (k.kind) {
    case value_kind::boolean: return "bool";
    case value_kind::integer: return "int";
    case value_kind::real: return "real";
    case value_kind::string: return "string";
    case value_kind::integer_list: return "list of int";
    case value_kind::real_list: return "list of real";
    case value_kind::string_list: return "list of string";
    default: return "?";
  }
}

}  // namespace

std::string render_resolved(const resolved_recipe& r, const schema& s) {
  std::string out = "# tandem recipe " + r.file + ", resolved";
  if (r.files.size() > 1) {
    out += " (inherits";
    for (std::size_t i = 0; i + 1 < r.files.size(); ++i) out += " " + r.files[i];
    out += ")";
  }
  out += "\n# a comment names where a value was set; values without one are schema defaults\n";
  render(tree_of(s), 0, [&](const key_spec& k) -> std::pair<std::string, std::string> {
    const auto& v = r.values.at(k.path);
    return {to_yaml(v.value), v.origin.is_default() ? "" : v.origin.to_string()};
  }, out);
  return out;
}

std::string render_schema(const schema& s) {
  std::string out =
      "# tandem recipe schema: every key with its default; after '#': type, range, description.\n"
      "# A recipe may also name parents: defaults: parent.yaml (or a list), relative to itself.\n";
  render(tree_of(s), 0, [](const key_spec& k) -> std::pair<std::string, std::string> {
    std::string type = type_text(k);
    if (k.nullable) type += " or null";
    std::string flags = k.required ? ", required" : "";
    if (k.unbuilt) flags += ", not built yet: " + k.unbuilt->reason;
    return {k.required ? "~" : to_yaml(k.default_value), type + range_text(k) + flags + ". " + k.description};
  }, out);
  return out;
}

}  // namespace tandem::config
