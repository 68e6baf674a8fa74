// Writing one safetensors file: the header (safetensors_format.h), then each tensor's bytes as its
// producer fills them, chunk by chunk through one bounded buffer, so a tensor of any size is
// written without a second copy of it in memory. Blocks of 64 KiB that are entirely zero are left
// as holes (the file reads the same and takes less disk). The file is fsynced before this returns.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "gpu/core/status.h"
#include "gpu/model/safetensors_format.h"

namespace tandem::gpu {

/// One tensor to write.
struct st_write_item {
  std::string name;
  st_dtype type = st_dtype::bf16;
  std::vector<std::int64_t> shape;
  /// Fills `out` with the tensor's data bytes [byte_offset, byte_offset + out.size()).
  std::function<status(std::int64_t byte_offset, std::span<std::byte> out)> fill;

  /// Bytes of data: elements x bits / 8.
  std::int64_t bytes() const;
};

/// Creates `path` (which must not exist) holding `items` in order. On failure the file is removed
/// and the status names it and the tensor being written.
status write_st_file(const std::filesystem::path& path, const std::vector<st_write_item>& items,
                     const std::map<std::string, std::string>& metadata);

/// fsync of a file or directory; io_error naming it on failure.
status sync_path(const std::filesystem::path& path);

}  // namespace tandem::gpu
