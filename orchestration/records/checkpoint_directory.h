// The on-disk protocol of a run's step checkpoints, as the controller uses it:
//
//   CHECKPOINT_DIR/step_N/          a complete checkpoint: its manifest.json is present and valid
//   CHECKPOINT_DIR/step_N.partial/  one being written: never used; begin_checkpoint removes a stale one
//
// A save goes begin -> write -> commit:
//
//   begin_checkpoint    CHECKPOINT_DIR made, step_N.partial/ made new and empty (a stale one removed)
//   (the caller)        the ranks and the controller write their files into step_N.partial/, in
//                       any sub-directories
//   commit_checkpoint   1. every regular file under partial fsynced, then every directory under it,
//                          deepest first
//                       2. manifest.json written LAST (whole_file.h: a temporary file, synced,
//                          renamed), listing every file with its size; partial fsynced
//                       3. partial renamed to step_N: renameat2 RENAME_NOREPLACE, or, when step_N
//                          exists, RENAME_EXCHANGE (the old checkpoint now under the partial name)
//                       4. CHECKPOINT_DIR fsynced, making the rename durable; then the old
//                          checkpoint, if any, removed (one that cannot be stays as
//                          step_N.partial, never listed, for the next begin to remove)
//
// A crash at any point leaves the previous state or the new complete checkpoint: before step 3
// step_N is untouched and the partial is never listed; step 3 is one atomic rename. Removal
// (remove_checkpoint) takes the manifest first, so one cut short leaves a directory without a
// manifest, which the listing skips: a directory without a valid manifest is never complete.
//
//   manifest.json   the caller's object, plus
//                   {"format": "tandem-checkpoint", "format_version": 1, "step": N,
//                    "files": [{"path": "rank_0/model.safetensors", "bytes": 1234}, ...]}
//                   ("files": every regular file under the directory but manifest.json, its path
//                   relative with '/', sorted by path)
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "orchestration/records/file_error.h"

namespace tandem::records {

struct checkpoint_entry {
  std::int64_t step = 0;
  std::filesystem::path path;  ///< CHECKPOINT_DIR/step_N
  nlohmann::json manifest;     ///< manifest.json as read
};

struct checkpoint_listing {
  std::vector<checkpoint_entry> complete;  ///< ascending by step
  /// One sentence per step_N or step_N.partial entry not used, naming it and why, ascending by
  /// step ("checkpoints/step_4: no manifest.json (an unfinished save)", "checkpoints/step_6.partial:
  /// an unfinished save"); entries of other names are ignored. A CHECKPOINT_DIR that exists but
  /// cannot be read is one sentence too ("checkpoints: cannot list: Permission denied").
  std::vector<std::string> skipped;
};

/// "step_N".
std::string checkpoint_name(std::int64_t step);

/// Makes CHECKPOINT_DIR (with parents) and a new empty step_N.partial in it, a stale one removed
/// first; returns the partial path. step_N itself is never touched. Errors
/// (cannot_create_directory): a negative step; "cannot create DIR: REASON"; "cannot remove the
/// unfinished DIR/step_N.partial: REASON". A failed call leaves at most CHECKPOINT_DIR made and a
/// partly removed stale partial, which the next call removes.
file_result<std::filesystem::path> begin_checkpoint(const std::filesystem::path& checkpoint_dir, std::int64_t step);

/// Commits `partial` (CHECKPOINT_DIR/step_N.partial, as begin_checkpoint made it) as step N, as the
/// header comment says. `manifest` must be a JSON object; "format", "format_version", "step" and
/// "files" are set in it (replacing any the caller put there). Returns step_N's path.
/// Errors, naming the path and the OS reason: cannot_create ("cannot create
/// DIR/step_N.partial/manifest.json.tmp: REASON"); cannot_write ("cannot commit PARTIAL as step N:
/// it is not named step_N.partial", "cannot write PARTIAL/manifest.json: the manifest is not a JSON
/// object", "cannot list PARTIAL: REASON", "cannot sync PATH: REASON", "cannot write
/// PARTIAL/manifest.json: REASON", "cannot move DIR/step_N.partial into place as DIR/step_N:
/// REASON").
/// On failure step_N is unchanged (the previous complete checkpoint, if any, intact) and the
/// partial directory is left for the next begin to remove; the one exception is a failed fsync of
/// CHECKPOINT_DIR after the rename (cannot_write "cannot sync CHECKPOINT_DIR"), when step_N already
/// holds the new checkpoint but a crash may still bring back the previous one.
file_result<std::filesystem::path> commit_checkpoint(const std::filesystem::path& partial, std::int64_t step,
                                                     nlohmann::json manifest);

/// The complete checkpoints of CHECKPOINT_DIR: each directory step_N (N in decimal, without
/// leading zeros) whose manifest.json parses as an object with format "tandem-checkpoint",
/// format_version 1, step == N, and every listed file present (inside step_N) at its size. The
/// rest of the step_N and step_N.partial entries are in `skipped`. A missing CHECKPOINT_DIR lists
/// nothing. Never modifies anything; never fails.
checkpoint_listing list_checkpoints(const std::filesystem::path& checkpoint_dir);

/// Removes CHECKPOINT_DIR/step_N: manifest.json first, then an fsync of step_N, so a crash midway
/// leaves a directory list_checkpoints skips; then everything else, then an fsync of
/// CHECKPOINT_DIR. nullopt when done or when step_N does not exist. Errors (cannot_write):
/// "cannot remove PATH: REASON", "cannot sync PATH: REASON"; a failed call may leave step_N
/// without its manifest (no longer listed) and partly removed; calling again finishes it.
std::optional<file_error> remove_checkpoint(const std::filesystem::path& checkpoint_dir, std::int64_t step);

}  // namespace tandem::records
