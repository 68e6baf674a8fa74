// A Hugging Face checkpoint directory opened for a text-only load: config.json parsed, every
// safetensors header and the index validated, every tensor name planned (weight_plan.h) and every
// text tensor's dtype and shape checked, before a single weight is read. This is what `tandem
// inspect` shows and what every command that takes a model directory goes through.
#pragma once

#include <filesystem>
#include <optional>

#include "gpu/core/device.h"
#include "gpu/core/slab.h"
#include "gpu/core/status.h"
#include "gpu/model/checkpoint_files.h"
#include "gpu/model/config.h"
#include "gpu/model/layout.h"
#include "gpu/model/weight_loader.h"
#include "gpu/model/weight_plan.h"

namespace tandem::gpu {

struct checkpoint {
  std::filesystem::path directory;
  model_config config;
  model_layout layout;                    ///< the text stack, in the engine's dtype
  std::optional<checkpoint_files> files;  ///< none for a config-only directory
  weight_plan plan;                       ///< empty without files
  load_report report;                     ///< what a load takes and skips
};

/// Opens `dir` (a directory holding config.json and, usually, weights) for a load into a slab of
/// `slab_type` (float32, bfloat16 or float16). Every error names the file and the tensor or key.
result<checkpoint> open_checkpoint(const std::filesystem::path& dir, dtype slab_type);

/// Allocates a parameter slab on `dev` and loads the text stack into it. not_found for a
/// config-only checkpoint.
result<slab> load_checkpoint(const checkpoint& c, device dev);

}  // namespace tandem::gpu
