// The keys a resume must keep and their fingerprint (recipe_fingerprint.h).
#include "orchestration/config/recipe_fingerprint.h"

#include <array>
#include <cstdint>
#include <cstdio>
#include <string_view>

#include "orchestration/config/config_value.h"

namespace tandem::config {
namespace {

constexpr std::array<std::string_view, 11> changeable_keys = {
    "grpo.max_num_steps",          "grpo.max_num_epochs",     "cluster.num_nodes",
    "cluster.gpus_per_node",       "cluster.device_memory_gib", "cluster.controller_host",
    "cluster.controller_port",     "runtime.heartbeat_interval_ms", "runtime.heartbeat_timeout_ms",
    "runtime.request_timeout_s",   "env.num_workers",
};

constexpr std::array<std::string_view, 3> changeable_prefixes = {"logger.", "policy.generation.colocated.resources.",
                                                                  "checkpointing."};

}  // namespace

bool changeable_across_resume(const std::string& key) {
  if (key == "checkpointing.save_optimizer") return false;
  for (const auto k : changeable_keys)
    if (key == k) return true;
  for (const auto p : changeable_prefixes)
    if (key.starts_with(p)) return true;
  return false;
}

std::map<std::string, std::string> resume_values(const resolved_recipe& r) {
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : r.values)
    if (!changeable_across_resume(key)) out.emplace(key, to_yaml(value.value));
  return out;
}

std::string recipe_fingerprint(const std::map<std::string, std::string>& values) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  auto add = [&h](std::string_view text) {
    for (const char c : text) {
      h ^= static_cast<unsigned char>(c);
      h *= 0x100000001b3ull;
    }
  };
  for (const auto& [key, value] : values) {
    add(key);
    add("=");
    add(value);
    add("\n");
  }
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(h));
  return text;
}

std::vector<std::string> differing_keys(const std::map<std::string, std::string>& saved,
                                        const std::map<std::string, std::string>& now) {
  std::vector<std::string> out;
  auto a = saved.begin();
  auto b = now.begin();
  while (a != saved.end() || b != now.end()) {
    if (b == now.end() || (a != saved.end() && a->first < b->first)) {
      out.push_back(a->first + ": " + a->second + " in the checkpoint, not in this build's recipes");
      ++a;
    } else if (a == saved.end() || b->first < a->first) {
      out.push_back(b->first + ": " + b->second + " now, not in the checkpoint");
      ++b;
    } else {
      if (a->second != b->second) out.push_back(a->first + ": " + a->second + " in the checkpoint, " + b->second + " now");
      ++a;
      ++b;
    }
  }
  return out;
}

}  // namespace tandem::config
