// The files of one run in its directory (run_directory.h), created at the start of the run,
// before any member is spawned, which also proves the directory writable:
//   metrics.jsonl      one record per step          (when logger.jsonl_enabled)
//   generations.jsonl  one record per trajectory    (when logger.jsonl_enabled)
//   controller.log     the controller's own lines, as on its stdout and stderr
//   events.out.tfevents.*  TensorBoard events, one per step (when logger.tensorboard_enabled)
//   recipe.yaml        the resolved recipe, written whole (whole_file.h)
// The record files are created new (record_file.h): a run never writes into another's files; a
// resumed run reopens its own, cut back to its checkpoint's sizes (reopen_run_files).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
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

/// Sizes of a run's record files at a checkpoint (what reopening cuts them back to).
struct record_sizes {
  std::uint64_t metrics = 0;
  std::uint64_t generations = 0;
  std::string tensorboard_file;  ///< the events file's name in the directory; empty: none
  std::uint64_t tensorboard = 0;
};

/// The sizes of `files` now (what a checkpoint records): the bytes of their whole records, 0 and
/// no events file for a file not written. Taken between appends (the controller's one thread).
record_sizes sizes_of(const run_files& files);

/// Reopens the files of a run being resumed in `directory` (the inverse of a crash: what was
/// written after the checkpoint goes):
///   metrics.jsonl, generations.jsonl (when jsonl): cut back to sizes.metrics, sizes.generations
///     (record_file::reopen: each size must end a record);
///   the events file (when tensorboard): sizes.tensorboard_file, a plain name in `directory`, cut
///     back to sizes.tensorboard (tensorboard_events::reopen); when the checkpoint recorded none,
///     a new one, as create_run_files opens it;
///   controller.log: opened for appending, never cut (it keeps the lines of every attempt);
///     created when missing;
///   recipe.yaml: rewritten whole with `recipe_yaml`.
/// A file that is off (jsonl or tensorboard false) is neither opened nor changed. Every size is
/// checked before anything is cut, made or rewritten. Errors: cannot_create (the reopen errors of
/// record_file.h and tensorboard_events.h, naming the file: "DIR/metrics.jsonl holds 10 bytes,
/// fewer than the 33 its checkpoint recorded"; or a file that cannot be made), cannot_write. On an
/// error no file this call opened stays open and the files it made are removed; a refusal from
/// the checks leaves every file unchanged, and so does any error before the cuts. The cuts come
/// last, after recipe.yaml is rewritten: one then fails only for an I/O error, and leaves the
/// recipe rewritten and the files before it cut.
file_result<run_files> reopen_run_files(const std::filesystem::path& directory, bool jsonl, std::string_view recipe_yaml,
                                        bool tensorboard, const record_sizes& sizes);

}  // namespace tandem::records
