// Loading the text stack of a checkpoint into a parameter slab, by layout offset, converting each
// tensor from its file dtype (float32, bfloat16, float16) to the slab's (round to nearest even
// where narrowing). check_weights validates every planned tensor's dtype and shape before
// load_weights reads a byte.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gpu/core/slab.h"
#include "gpu/core/status.h"
#include "gpu/model/checkpoint_files.h"
#include "gpu/model/weight_plan.h"

namespace tandem::gpu {

/// Tensors skipped under one non-text prefix.
struct skipped_group {
  std::string prefix;
  std::int64_t tensors = 0;
  std::int64_t bytes = 0;
};

/// What a load takes and leaves, counted from the headers.
struct load_report {
  std::int64_t text_tensors = 0, text_bytes = 0;            ///< loaded (bytes as stored)
  std::int64_t unused_kv_tensors = 0, unused_kv_bytes = 0;  ///< KV-shared layers' K/V, ignored
  std::vector<skipped_group> skipped;                       ///< non-text parts, in prefix order
  bool tied_head_present = false;                           ///< a tied lm_head.weight to check

  std::int64_t skipped_tensors() const;
  std::int64_t skipped_bytes() const;
  /// The one line a load prints about what it skipped: "skipped 412 non-text tensors (1.2 GB):
  /// model.vision_tower. 300 (1.0 GB), model.audio_tower. 112 (0.2 GB)"; empty when none.
  std::string skipped_line() const;
};

/// Checks dtypes (float32, bfloat16 or float16) and shapes against the layout; reads no data.
/// Errors are invalid_argument naming the file and the tensor.
result<load_report> check_weights(const weight_plan& plan, const checkpoint_files& files,
                                  const model_config& config, const model_layout& layout);

/// Loads every text tensor into `dst` (resident, at least layout.total_bytes(), in the layout's
/// dtype, on any device) and checks that a tied lm_head.weight equals the embedding. The plan must
/// have passed check_weights. On failure the slab's contents are unspecified (partly loaded); the
/// caller must not use them.
status load_weights(const weight_plan& plan, const checkpoint_files& files, const model_config& config,
                    const model_layout& layout, const slab& dst);

/// "1.2 GB", "340 MB", "12 kB", "17 B" (decimal units).
std::string format_bytes(std::int64_t bytes);

}  // namespace tandem::gpu
