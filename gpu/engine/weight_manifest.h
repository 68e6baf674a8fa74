// The refit manifest and its bucket plan (DESIGN.md section 4). Once, at start-up, the policy side
// sends the ordered manifest {name, shape, dtype}; the rollout side checks it against its own
// layout. Both then cut the concatenation of all tensors, in manifest order, into the same byte
// ranges ("buckets") of at most bucket_bytes each, so every refit streams packed buckets with no
// per-tensor metadata. A tensor larger than a bucket spans several; a bucket may hold many.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "gpu/core/dtype.h"
#include "plain/manifest.h"
#include "gpu/core/status.h"

namespace tandem::gpu {

/// One tensor {name, shape, dtype} and the ordered list: one definition for every layer (plain/manifest.h).
using plain::manifest_entry;
using plain::weight_manifest;

/// ok when `theirs` equals `ours` entry by entry; else invalid_argument naming the first
/// difference ("entry 12: layers.0.self_attn.q_proj.weight: shape [2048, 1536] vs [4096, 1536]").
status check_manifest(const weight_manifest& ours, const weight_manifest& theirs);

/// One contiguous piece of a tensor inside a bucket.
struct bucket_piece {
  std::size_t entry = 0;           ///< index into the manifest
  std::int64_t entry_offset = 0;   ///< byte offset inside the tensor
  std::int64_t bucket_offset = 0;  ///< byte offset inside the bucket
  std::int64_t bytes = 0;
};

class bucket_plan {
 public:
  /// Cuts `manifest` into buckets of at most `bucket_bytes` (> 0).
  bucket_plan(const weight_manifest& manifest, std::int64_t bucket_bytes);

  std::size_t bucket_count() const { return bucket_begin_.size(); }
  std::int64_t total_bytes() const { return total_; }
  /// Bytes of bucket i (bucket_bytes except possibly the last).
  std::int64_t bucket_size(std::size_t i) const;
  /// The tensor pieces of bucket i, in order.
  std::vector<bucket_piece> pieces(std::size_t i) const;

 private:
  std::vector<std::int64_t> entry_begin_;   // byte offset of each entry in the stream
  std::vector<std::int64_t> entry_bytes_;
  std::vector<std::int64_t> bucket_begin_;  // byte offset of each bucket in the stream
  std::int64_t total_ = 0;
};

}  // namespace tandem::gpu
