// One safetensors file, memory-mapped read-only, its header validated whole (safetensors_format.h)
// before any tensor is touched. Copies share the mapping. A file truncated by another process
// after open() faults on access (SIGBUS): checkpoints being read must not be rewritten in place.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>

#include "gpu/core/status.h"
#include "gpu/model/safetensors_format.h"

namespace tandem::gpu {

class st_file {
 public:
  /// Opens, maps and validates `path`. not_found when it does not exist, io_error when it cannot
  /// be read, invalid_argument (naming the file and the tensor) for a bad header.
  static result<st_file> open(const std::filesystem::path& path);

  const std::filesystem::path& path() const;
  const st_header& header() const;
  std::int64_t file_bytes() const;

  /// The bytes of `t`, a tensor of this file's header.
  std::span<const std::byte> data(const st_tensor& t) const;
  /// Hints the kernel that `t` is about to be read front to back.
  void will_read(const st_tensor& t) const;
  /// Drops this process's mapping of the whole pages inside bytes [begin, end) of `t` (the page
  /// cache keeps them), so loading a checkpoint does not hold it twice in resident memory.
  void done_reading(const st_tensor& t, std::int64_t begin, std::int64_t end) const;

 private:
  struct mapping;
  std::shared_ptr<const mapping> map_;
};

}  // namespace tandem::gpu
