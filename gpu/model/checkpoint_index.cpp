// Parsing of model.safetensors.index.json.
#include "gpu/model/checkpoint_index.h"

#include <set>

#include "gpu/model/json_text.h"

namespace tandem::gpu {
namespace {

// A shard must be a file beside the index: a name, not a path that could leave the directory.
std::string shard_name_problem(const std::string& s) {
  if (s.empty()) return "is empty";
  if (s.find('/') != std::string::npos || s.find('\\') != std::string::npos) return "is a path, not a file name";
  if (s.find('\0') != std::string::npos) return "contains a NUL byte";
  if (s == "." || s == "..") return "is not a file name";
  if (!s.ends_with(".safetensors")) return "does not end in .safetensors";
  return {};
}

}  // namespace

result<checkpoint_index> parse_checkpoint_index(std::string_view json_text, const std::string& source) {
  auto parsed = parse_json_strict(json_text, source, 8);
  if (!parsed) return parsed.error();
  const nlohmann::json& root = *parsed;
  auto bad = [&](const std::string& what) { return status(status_code::invalid_argument, source + ": " + what); };
  if (!root.is_object()) return bad("expected a JSON object at the top level");
  checkpoint_index index;
  if (auto m = root.find("metadata"); m != root.end() && !m->is_null()) {
    if (!m->is_object()) return bad("metadata: expected an object");
    if (auto t = m->find("total_size"); t != m->end() && !t->is_null()) {
      if (!t->is_number_integer() || t->get<std::int64_t>() < 0)
        return bad("metadata.total_size: expected a non-negative integer, got " + t->dump().substr(0, 40));
      index.total_size = t->get<std::int64_t>();
    }
  }
  const auto w = root.find("weight_map");
  if (w == root.end()) return bad("weight_map: missing");
  if (!w->is_object()) return bad("weight_map: expected an object of tensor name -> shard file");
  if (w->empty()) return bad("weight_map: names no tensor");
  std::set<std::string> shards;
  for (const auto& [name, shard] : w->items()) {
    if (name.empty()) return bad("weight_map: a tensor has an empty name");
    if (!shard.is_string()) return bad("weight_map " + quote_name(name) + ": expected a shard file name, got " + shard.dump().substr(0, 40));
    const std::string file = shard.get<std::string>();
    if (auto problem = shard_name_problem(file); !problem.empty())
      return bad("weight_map " + quote_name(name) + ": shard " + quote_name(file) + " " + problem);
    index.weight_map.emplace(name, file);
    shards.insert(file);
  }
  index.shards.assign(shards.begin(), shards.end());
  return index;
}

}  // namespace tandem::gpu
