// The start of `tandem run`, before any member is spawned: the run's directory chosen
// (logger.log_dir, or with --fresh its first free sibling), made and checked, its files created
// (orchestration/records/run_directory.h, run_files.h), and the recipe as this run uses it, whose
// logger.log_dir names the directory chosen.
#pragma once

#include <string>

#include "orchestration/config/resolve.h"
#include "orchestration/records/file_error.h"
#include "orchestration/records/run_files.h"

namespace tandem::cli {

struct prepared_run {
  config::resolved_recipe recipe;  ///< logger.log_dir: the run's directory (set by --fresh when it moved)
  std::string recipe_yaml;         ///< recipe, rendered: what recipe.yaml holds and the members receive
  records::run_files files;            ///< open in the run's directory
  /// "run directory: logs/tiny-cpu" or "run directory: logs/tiny-cpu.2 (logs/tiny-cpu holds
  /// another run)".
  std::string first_line;
};

/// Chooses and prepares the run's directory for `asked`; `fresh`: --fresh was given. Errors name
/// the path and the reason ("logs/x: not a directory", "logs/tiny-cpu holds the records of another
/// run (...); pass --fresh ...", "cannot create logs/x/metrics.jsonl: Read-only file system").
records::file_result<prepared_run> prepare_run(const config::resolved_recipe& asked, bool fresh);

}  // namespace tandem::cli
