// A run's directory (logger.log_dir): everything a run writes goes under it (run_files.h), and it
// belongs to that one run. At the start of a run the directory asked for is made (with its
// parents) and checked; one that holds another run's records is refused, or with --fresh left as
// it is for the first free sibling, <log_dir>.2, <log_dir>.3, ...
//
//   asked --missing--> made with its parents ("cannot create DIR: REASON")
//         --it or a parent is not a directory--> "PATH: not a directory"
//         --holds records (run_record_names())--> without --fresh: "DIR holds the records of
//                another run (...); pass --fresh ..."; with --fresh: DIR.2, DIR.3, ... each
//                skipped while it is a file or holds records, the first other one made and chosen
//         --free (missing, empty, or only other files)--> chosen
//
// Whether the chosen directory is writable is found by creating the run's files in it
// (create_run_files); nothing here writes into a directory that holds records.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "orchestration/records/file_error.h"

namespace tandem::records {

/// The directory a run writes to.
struct run_directory {
  std::filesystem::path path;          ///< the run's directory
  std::filesystem::path asked;         ///< logger.log_dir as given (a trailing '/' dropped)
  std::vector<std::string> other_run;  ///< moved: the records of the run that holds `asked`
  bool moved() const { return path != asked; }
};

/// The names whose presence marks a directory as holding a run's records: recipe.yaml,
/// metrics.jsonl, generations.jsonl, controller.log, metrics.png, final_weights.
const std::vector<std::string>& run_record_names();

/// Those of run_record_names() present in `dir` (any kind of entry), in that order.
std::vector<std::string> records_in(const std::filesystem::path& dir);

/// Makes and checks `log_dir` (see the header comment); with `fresh`, moves to the first free
/// sibling when `log_dir` holds another run. Errors: not_a_directory, cannot_create_directory,
/// holds_another_run, no_free_directory (after <log_dir>.999).
file_result<run_directory> choose_run_directory(const std::filesystem::path& log_dir, bool fresh);

}  // namespace tandem::records
