// The files of one run in its directory (run_directory.h), created at the start of the run,
// before any member is spawned, which also proves the directory writable:
//   metrics.jsonl      one record per step          (when logger.jsonl_enabled)
//   generations.jsonl  one record per trajectory    (when logger.jsonl_enabled)
//   controller.log     the controller's own lines, as on its stdout and stderr
//   events.out.tfevents.*  TensorBoard events, one per step (when logger.tensorboard_enabled)
//   recipe.yaml        the resolved recipe, written whole (whole_file.h)
// The record files are created new (record_file.h): a run never writes into another's files.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string_view>

#include "orchestration/records/file_error.h"
#include "orchestration/records/record_file.h"
#include "orchestration/records/tensorboard_events.h"

namespace tandem::records {

/// The open record files of a run; a null file is not written.
struct run_files {
  std::filesystem::path directory;
  std::shared_ptr<record_file> metrics;      ///< null without logger.jsonl_enabled
  std::shared_ptr<record_file> generations;  ///< null without logger.jsonl_enabled
  std::shared_ptr<record_file> log;          ///< controller.log
  std::shared_ptr<tensorboard_events> tensorboard;  ///< null without logger.tensorboard_enabled

  /// The first failure of any of them, if one failed.
  std::optional<file_error> failure() const;
};

/// Creates the files above in `directory` (it must hold none of them) and writes recipe.yaml.
/// Errors: cannot_create ("cannot create DIR/metrics.jsonl: Read-only file system"),
/// cannot_write; on an error the files this call created are removed again.
file_result<run_files> create_run_files(const std::filesystem::path& directory, bool jsonl, std::string_view recipe_yaml,
                                        bool tensorboard = false);

}  // namespace tandem::records
