// Recipe files and overrides into layers, with duplicate-key, unknown-key and cycle detection.
#include "orchestration/config/recipe_layer.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <set>

#include "orchestration/config/suggest.h"

namespace tandem::config {
namespace {

namespace fs = std::filesystem;

source_location at(const std::string& file, const YAML::Mark& m) {
  source_location loc;
  loc.file = file;
  if (m.line >= 0) loc.line = m.line + 1;
  if (m.column >= 0) loc.column = m.column + 1;
  return loc;
}

std::string join(const std::string& base, const std::string& name) {
  return base.empty() ? name : base + "." + name;
}

/// "unknown key; did you mean 'x'?" with candidates among siblings, then anywhere in the schema.
std::string unknown_key_message(const std::string& section, const std::string& name, const schema& s) {
  std::string msg = "unknown key";
  if (auto near = nearest(name, s.children(section))) return msg + "; did you mean '" + join(section, *near) + "'?";
  for (const auto& k : s.keys()) {
    const std::string last = k.path.substr(k.path.rfind('.') + 1);
    if (last == name) return msg + "; did you mean '" + k.path + "'?";
  }
  std::vector<std::string> all;
  for (const auto& k : s.keys()) all.push_back(k.path);
  if (auto near = nearest(join(section, name), all)) return msg + "; did you mean '" + *near + "'?";
  return msg + " (`tandem validate --schema` lists every key)";
}

class layer_reader {
 public:
  layer_reader(const schema& s, recipe_layer& layer, config_errors& errors, source_location origin)
      : schema_(s), layer_(layer), errors_(errors), origin_(std::move(origin)) {}

  /// Walks a mapping that sits at `section` ("" for the file's root).
  void read_section(const YAML::Node& map, const std::string& section, bool is_root) {
    if (map.IsNull()) return;  // "policy:" with nothing under it is an empty section
    if (!map.IsMap()) {
      error(map.Mark(), section, "expected a mapping of keys, got " + shape_of(map));
      return;
    }
    std::map<std::string, YAML::Mark> seen;
    for (auto it = map.begin(); it != map.end(); ++it) {
      const YAML::Node k = it->first;  // copies: the iterator's pair is a temporary
      const YAML::Node v = it->second;
      if (!k.IsScalar()) {
        error(k.Mark(), section, "keys must be plain names, got " + shape_of(k));
        continue;
      }
      const std::string name = k.Scalar();
      const std::string path = join(section, name);
      if (auto [prev, fresh] = seen.emplace(name, k.Mark()); !fresh) {
        error(k.Mark(), path, "duplicate key (first set at line " + std::to_string(prev->second.line + 1) +
                                  ", column " + std::to_string(prev->second.column + 1) + ")");
        continue;
      }
      if (is_root && name == "defaults") continue;  // read by the chain loader
      read_value(k, v, section, name);
    }
  }

  /// One key: a schema key (recorded), a section (descended into) or an unknown name.
  void read_value(const YAML::Node& key_node, const YAML::Node& v, const std::string& section,
                  const std::string& name) {
    const std::string path = join(section, name);
    if (schema_.find(path)) {
      layer_entry e{v, locate(key_node.Mark()), locate(v.IsNull() ? key_node.Mark() : v.Mark())};
      layer_.entries[path] = e;
    } else if (schema_.is_section(path)) {
      layer_.sections.emplace(path, locate(key_node.Mark()));
      read_section(v, path, false);
    } else if (errors_.size() < reported_errors) {
      error(key_node.Mark(), path, unknown_key_message(section, name, schema_));
    } else {  // past what a report prints: counted, without the search for a suggestion
      error(key_node.Mark(), path, "unknown key");
    }
  }

  void error(const YAML::Mark& m, const std::string& path, std::string message) {
    errors_.push_back({locate(m), path, std::move(message)});
  }

  source_location locate(const YAML::Mark& m) const {
    if (origin_.is_override()) return origin_;
    return at(origin_.file, m);
  }

  static std::string shape_of(const YAML::Node& n) {
    if (n.IsMap()) return "a mapping";
    if (n.IsSequence()) return "a list";
    if (n.IsNull()) return "null";
    return "'" + n.Scalar() + "'";
  }

 private:
  const schema& schema_;
  recipe_layer& layer_;
  config_errors& errors_;
  source_location origin_;
};

/// Display path of a parent: the child's folder joined with the name written, lexically normal.
std::string parent_display(const std::string& child, const std::string& written) {
  fs::path p = fs::path(written).is_absolute() ? fs::path(written) : fs::path(child).parent_path() / written;
  return p.lexically_normal().string();
}

std::string identity(const std::string& display) {
  std::error_code ec;
  auto c = fs::weakly_canonical(display, ec);
  return ec ? display : c.string();
}

/// A recipe file's text, or why it cannot be one: not found, not a regular file (a directory, a
/// FIFO that would block the read, a device), larger than a recipe can be, unreadable.
struct recipe_text {
  std::string text;
  std::string error;
};

recipe_text read_recipe_text(const std::string& file) {
  constexpr std::uintmax_t max_recipe_bytes = std::uintmax_t{16} << 20;
  std::error_code ec;
  const fs::file_status st = fs::status(file, ec);
  if (ec || st.type() == fs::file_type::not_found) return {"", "cannot read the recipe file: no such file"};
  if (st.type() == fs::file_type::directory) return {"", "is a directory, not a recipe file"};
  if (st.type() != fs::file_type::regular)
    return {"", "is not a regular file (a FIFO, socket or device): a recipe is a YAML file"};
  const std::uintmax_t size = fs::file_size(file, ec);
  if (ec) return {"", "cannot read the recipe file: " + ec.message()};
  if (size > max_recipe_bytes)
    return {"", "is " + std::to_string(size) + " bytes, more than a recipe can be (16 MiB)"};
  std::ifstream in(file, std::ios::binary);
  if (!in) return {"", "cannot read the recipe file: permission denied or unreadable"};
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) return {"", "cannot read the recipe file: a read error"};
  return {s.str(), ""};
}

class chain_loader {
 public:
  chain_loader(const schema& s, recipe_chain& out) : schema_(s), out_(out) {}

  /// Loads `file` and its parents; `stack` holds the files that include it (for cycle reports).
  void load(const std::string& file, std::vector<std::string>& stack) {
    auto text = read_recipe_text(file);
    if (!text.error.empty()) return fail({source_location{file, 0, 0, 0}, "", text.error});
    YAML::Node root;
    try {
      std::vector<YAML::Node> documents = YAML::LoadAll(text.text);
      if (documents.size() > 1)
        return fail({at(file, documents[1].Mark()), "",
                     "the file holds " + std::to_string(documents.size()) +
                         " YAML documents; a recipe is one (this one would be ignored)"});
      if (!documents.empty()) root = documents.front();
    } catch (const YAML::ParserException& e) {
      out_.errors.push_back({at(file, e.mark), "", "YAML syntax: " + e.msg});
      out_.complete = false;
      return;
    }
    if (!root.IsMap() && !root.IsNull()) {
      fail({at(file, root.Mark()), "", "a recipe is a mapping of sections (grpo:, policy:, ...), got " +
                                          layer_reader::shape_of(root)});
      return;
    }
    stack.push_back(identity(file));
    if (root.IsMap() && root["defaults"]) load_parents(file, root, stack);
    recipe_layer layer;
    layer.file = file;
    layer_reader(schema_, layer, out_.errors, source_location{file, 0, 0, 0}).read_section(root, "", true);
    out_.layers.push_back(std::move(layer));
    stack.pop_back();
  }

 private:
  void load_parents(const std::string& file, const YAML::Node& root, std::vector<std::string>& stack) {
    const YAML::Node d = root["defaults"];
    std::vector<YAML::Node> names;
    if (d.IsScalar()) {
      names.push_back(d);
    } else if (d.IsSequence()) {
      for (const auto& n : d) names.push_back(n);
    } else {
      fail({at(file, d.Mark()), "defaults",
                             "expected a parent recipe path or a list of them, got " + layer_reader::shape_of(d)});
      return;
    }
    for (const auto& n : names) {
      if (!n.IsScalar() || n.Scalar().empty()) {
        fail({at(file, n.Mark()), "defaults", "expected a parent recipe path"});
        continue;
      }
      const std::string parent = parent_display(file, n.Scalar());
      if (!fs::is_regular_file(parent)) {
        fail({at(file, n.Mark()), "defaults", "parent recipe '" + n.Scalar() +
                                                                    "' not found (looked for " + parent + ")"});
        continue;
      }
      const std::string id = identity(parent);
      if (auto it = std::find(stack.begin(), stack.end(), id); it != stack.end()) {
        std::string cycle;
        for (auto i = it; i != stack.end(); ++i) cycle += fs::path(*i).filename().string() + " -> ";
        cycle += fs::path(id).filename().string();
        fail({at(file, n.Mark()), "defaults", "inheritance cycle: " + cycle});
        continue;
      }
      load(parent, stack);
    }
  }

  void fail(config_error e) {
    out_.errors.push_back(std::move(e));
    out_.complete = false;
  }

  const schema& schema_;
  recipe_chain& out_;
};

}  // namespace

recipe_chain load_recipe_chain(const std::string& path, const schema& s) {
  recipe_chain out;
  std::vector<std::string> stack;
  chain_loader(s, out).load(path, stack);
  return out;
}

recipe_chain load_resolved_text(const std::string& text, const std::string& display, const schema& s) {
  recipe_chain out;
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    out.errors.push_back({at(display, e.mark), "", "YAML syntax: " + e.msg});
    out.complete = false;
    return out;
  }
  if (!root.IsMap()) {
    out.errors.push_back({at(display, root.Mark()), "", "a resolved recipe is a mapping of sections, got " +
                                                           layer_reader::shape_of(root)});
    out.complete = false;
    return out;
  }
  if (root["defaults"]) {
    out.errors.push_back({at(display, root["defaults"].Mark()), "defaults",
                          "a resolved recipe names no parents; it is complete"});
    out.complete = false;
    return out;
  }
  recipe_layer layer;
  layer.file = display;
  layer_reader(s, layer, out.errors, source_location{display, 0, 0, 0}).read_section(root, "", true);
  out.layers.push_back(std::move(layer));
  return out;
}

recipe_layer parse_overrides(const std::vector<std::string>& overrides, const schema& s,
                             config_errors& errors) {
  recipe_layer layer;
  for (std::size_t i = 0; i < overrides.size(); ++i) {
    const std::string& text = overrides[i];
    source_location origin{text, 0, 0, static_cast<int>(i + 1)};
    const auto eq = text.find('=');
    if (eq == std::string::npos || eq == 0) {
      errors.push_back({origin, "", "expected key.path=value"});
      continue;
    }
    const std::string path = text.substr(0, eq);
    YAML::Node value;
    try {
      value = YAML::Load(text.substr(eq + 1));
    } catch (const YAML::ParserException& e) {
      errors.push_back({origin, path, "YAML syntax in the value: " + e.msg});
      continue;
    }
    const auto dot = path.rfind('.');
    const std::string section = dot == std::string::npos ? "" : path.substr(0, dot);
    const std::string name = dot == std::string::npos ? path : path.substr(dot + 1);
    layer_reader reader(s, layer, errors, origin);
    if (!s.is_section(section)) {
      errors.push_back({origin, path, unknown_key_message("", path, s)});
      continue;
    }
    if (s.is_section(path) && !s.find(path) && (value.IsNull() || (value.IsMap() && value.size() == 0))) {
      // In a file, an empty section is harmless; on the command line it reads as "clear the
      // section", which a layer cannot do: say so instead of doing nothing.
      errors.push_back({origin, path, "is a section: an override sets one key (" + path +
                                          ".KEY=VALUE); an empty value would change nothing"});
      continue;
    }
    YAML::Node key_node(name);
    reader.read_value(key_node, value, section, name);
  }
  return layer;
}

}  // namespace tandem::config
