// The start of `tandem run`, before any member is spawned: the run's directory chosen
// (logger.log_dir, or with --fresh its first free sibling), made and checked, its files created
// (orchestration/records/run_directory.h, run_files.h), and the recipe as this run uses it, whose
// logger.log_dir names the directory chosen.
//
// Resuming (checkpointing.enabled, no --fresh): when logger.log_dir holds a run's records and its
// checkpoint directory (checkpointing.checkpoint_dir, relative to the run directory) holds a
// complete checkpoint, the run resumes from the newest one: the recipe must keep every key a
// resume must keep (orchestration/config/recipe_fingerprint.h; otherwise the differing keys are
// listed and the run refused), the record files are cut back to the checkpoint's sizes and
// appended to, and the first line says where it resumes from. Unfinished saves are named and
// left alone (the next save of that step replaces them).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "actors/controller/checkpoint_state.hpp"
#include "orchestration/config/resolve.h"
#include "orchestration/records/file_error.h"
#include "orchestration/records/run_files.h"

namespace tandem::cli {

struct prepared_run {
  config::resolved_recipe recipe;  ///< logger.log_dir: the run's directory (set by --fresh when it moved)
  std::string recipe_yaml;         ///< recipe, rendered: what recipe.yaml holds and the members receive
  records::run_files files;            ///< open in the run's directory
  /// "run directory: logs/tiny-cpu", "run directory: logs/tiny-cpu.2 (logs/tiny-cpu holds
  /// another run)" or "run directory: logs/tiny-cpu (resuming from logs/tiny-cpu/checkpoints/step_4)".
  std::string first_line;
  std::vector<std::string> notes;  ///< lines after the first: checkpoints skipped, and why
  checkpoint_plan checkpoints;     ///< the run's checkpointing, and the checkpoint it resumes from
};

/// Chooses and prepares the run's directory for `asked`; `fresh`: --fresh was given. Errors name
/// the path and the reason ("logs/x: not a directory", "logs/tiny-cpu holds the records of another
/// run (...); pass --fresh ...", "cannot create logs/x/metrics.jsonl: Read-only file system",
/// "logs/x/checkpoints/step_4 was made with another recipe: grpo.seed: 7 in the checkpoint, 8
/// now; ...").
records::file_result<prepared_run> prepare_run(const config::resolved_recipe& asked, bool fresh);

}  // namespace tandem::cli
