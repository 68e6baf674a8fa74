// What `tandem inspect` prints about an opened checkpoint: the architecture, the resolved config
// with its per-layer table, every text tensor (name, file dtype, shape, layout offset), what a
// load ignores and skips, and the bytes on disk; as text for people or as JSON for scripts.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>

#include "gpu/model/checkpoint.h"

namespace tandem::cli {

/// The resolved config as JSON: every field of model_config, the per-layer table included.
nlohmann::json config_json(const gpu::model_config& c);

/// The whole report as JSON.
nlohmann::json checkpoint_json(const gpu::checkpoint& c);

/// The whole report as aligned text.
void print_checkpoint(const gpu::checkpoint& c, std::ostream& out);

}  // namespace tandem::cli
