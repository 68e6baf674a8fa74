// model.safetensors.index.json, the map of a sharded checkpoint: {"metadata": {"total_size": N,
// ...}, "weight_map": {tensor name: shard file name}}. Parsed strictly (unique keys; every shard a
// plain file name ending in .safetensors, never a path); whether the shards exist and agree with it
// is checked by checkpoint_files.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpu/core/status.h"

namespace tandem::gpu {

struct checkpoint_index {
  std::map<std::string, std::string, std::less<>> weight_map;  ///< tensor name -> shard file name
  std::vector<std::string> shards;        ///< distinct shard names, sorted
  std::optional<std::int64_t> total_size;  ///< metadata.total_size, informational only
};

/// Parses index text. Errors are invalid_argument and start with `source`, naming the key at
/// fault. Never throws.
result<checkpoint_index> parse_checkpoint_index(std::string_view json_text, const std::string& source);

/// The file name every index of this kind has.
inline constexpr std::string_view index_file_name = "model.safetensors.index.json";
/// The file name of an unsharded checkpoint.
inline constexpr std::string_view single_file_name = "model.safetensors";

}  // namespace tandem::gpu
