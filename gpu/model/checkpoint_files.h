// The safetensors files of a checkpoint directory: model.safetensors alone, or the shards that
// model.safetensors.index.json names. Opening validates every header and, for a sharded
// checkpoint, that the index and the shards agree exactly (every listed shard exists, every
// tensor sits in the shard the index names, no shard holds a tensor the index does not list).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "gpu/core/status.h"
#include "gpu/model/safetensors_file.h"

namespace tandem::gpu {

/// What a directory holds in the way of weights.
enum class weights_kind {
  none,     ///< no weight files at all (a config-only directory)
  single,   ///< model.safetensors
  sharded,  ///< model.safetensors.index.json and its shards
};

/// Looks at `dir` without opening anything. invalid_argument when both model.safetensors and an
/// index exist (which one is current?), unsupported when only PyTorch or other formats are there.
result<weights_kind> find_weights(const std::filesystem::path& dir);

class checkpoint_files {
 public:
  /// One tensor and the shard holding it.
  struct entry {
    const st_tensor* tensor = nullptr;
    std::size_t shard = 0;
  };

  /// Opens and cross-checks the weight files of `dir` (weights_kind single or sharded; none is
  /// not_found). Errors name the file and the tensor.
  static result<checkpoint_files> open(const std::filesystem::path& dir);

  const std::filesystem::path& directory() const { return dir_; }
  /// model.safetensors or the index: the file a message about the set as a whole names.
  const std::filesystem::path& manifest() const { return manifest_; }
  bool sharded() const { return sharded_; }
  const std::vector<st_file>& shards() const { return shards_; }
  /// Every tensor, shard by shard (sorted by file name), in data order within a shard.
  const std::vector<entry>& tensors() const { return tensors_; }
  const entry* find(std::string_view name) const;
  const st_file& file_of(const entry& e) const { return shards_[e.shard]; }
  /// Sum of the shard file sizes.
  std::int64_t total_bytes() const;

 private:
  std::filesystem::path dir_, manifest_;
  bool sharded_ = false;
  std::vector<st_file> shards_;
  std::vector<entry> tensors_;
  std::map<std::string, std::size_t, std::less<>> index_;
};

}  // namespace tandem::gpu
