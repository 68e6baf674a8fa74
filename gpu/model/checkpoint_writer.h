// Saving the text stack as a drop-in Hugging Face checkpoint directory: the text tensors under the
// names they were loaded with, in a chosen dtype; every other tensor of the source (non-text parts,
// unused K/V of KV-shared layers) copied byte for byte; config.json, generation_config.json, the
// tokenizer and every other non-weight file of the source copied; shards of a bounded size with a
// model.safetensors.index.json (one model.safetensors when everything fits).
//
// Atomic: everything is written into a hidden sibling directory ".NAME.partial-PID-N", each file
// fsynced, then the directory is renamed onto NAME (exchanged with an existing one when replacing)
// and the parent fsynced. A failed or interrupted save never leaves a NAME that looks complete;
// a failed one removes its partial directory, an interrupted one leaves only the hidden partial.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "gpu/core/slab.h"
#include "gpu/core/status.h"
#include "gpu/model/checkpoint.h"

namespace tandem::gpu {

struct save_options {
  dtype type = dtype::bfloat16;              ///< dtype of the text tensors (float32 for exactness)
  std::int64_t max_shard_bytes = 5'000'000'000;  ///< a larger tensor gets a shard of its own
  bool replace = false;                      ///< replace an existing directory (atomically)
  /// Called after each file is written and synced (its name); a non-ok status cancels the save.
  std::function<status(const std::string& file)> on_file;
  /// Writes more files into the partial directory (given) before it is committed, e.g. the
  /// optimizer state of a training checkpoint; they must be synced. A non-ok status cancels.
  std::function<status(const std::filesystem::path& partial)> extra_files;
};

struct save_report {
  std::filesystem::path directory;
  std::vector<std::string> shards;       ///< safetensors files, in order
  std::vector<std::string> copied;       ///< non-weight files copied from the source
  std::int64_t text_tensors = 0;         ///< written from the slab
  std::int64_t carried_tensors = 0;      ///< copied byte for byte from the source
  std::int64_t bytes = 0;                ///< tensor data written
};

/// Saves `weights` (a slab laid out by source.layout) into `out`. The source checkpoint must still
/// be on disk (its config, side files and carried tensors are read from it). invalid_argument when
/// `out` exists and options.replace is false; every other failure is io_error naming the file.
result<save_report> save_checkpoint(const checkpoint& source, const slab& weights,
                                    const std::filesystem::path& out, const save_options& options = {});

}  // namespace tandem::gpu
