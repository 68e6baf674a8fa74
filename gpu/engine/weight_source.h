// A train engine's live weights as a colocated generator reads them in place: no copy, and every
// later refit is a version bump (generate_engine::bump_weight_version). One address per manifest
// tensor, because an engine's slab aligns each tensor (gpu/README.md, "Layout") while the refit
// stream packs them end to end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "gpu/core/device.h"
#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"
#include "gpu/engine/weight_manifest.h"

namespace tandem::gpu {

struct weight_source {
  device dev;                            ///< where every tensor lives
  weight_manifest manifest;              ///< name, shape and dtype of each tensor, in refit order
  std::vector<const std::byte*> tensors; ///< tensors[i]: manifest[i].bytes() bytes on dev

  bool empty() const { return tensors.empty(); }
  /// chunked_xxh3 (gpu/core/chunked_hash.h) of the tensors' bytes concatenated in manifest order:
  /// the digest of the refit byte stream, whatever the tensors' sizes. Host memory only.
  std::uint64_t digest() const;
  /// The same for tensors on ctx.dev (== dev), hashed on the device (gpu/core/device_hash.h) after
  /// the work enqueued on ctx.stream. A device that cannot be read gives the digest of no bytes,
  /// which matches no weights; the engine's next call on it reports the failure.
  std::uint64_t digest(const exec_context& ctx) const;
};

/// ok when `source` has one non-null address per manifest entry and its manifest equals
/// `expected` entry by entry; else invalid_argument starting with `who` and naming the first
/// difference.
status check_weight_source(const char* who, const weight_source& source, const weight_manifest& expected);

}  // namespace tandem::gpu
