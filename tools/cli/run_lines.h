// The lines of `tandem run` (progress on stdout, the outcome on stdout or stderr), each written
// to its stream in one call and also appended to the run's controller.log; while a run_lines
// lives, the runtime's own stderr lines (actors/bridge/log_line.hpp: "tandem controller: ...")
// are appended to controller.log too. A controller.log that cannot be written keeps its whole
// lines and takes no more (orchestration/records/record_file.h); the run reads its failure from
// run_files::failure().
#pragma once

#include <memory>
#include <ostream>
#include <string>

#include "orchestration/records/record_file.h"

namespace tandem::cli {

class run_lines {
 public:
  /// `log`: controller.log, or null for none.
  run_lines(std::ostream& out, std::ostream& err, std::shared_ptr<records::record_file> log);
  ~run_lines();  // the runtime's lines are no longer copied
  run_lines(const run_lines&) = delete;
  run_lines& operator=(const run_lines&) = delete;

  /// One line (control characters shown escaped) to stdout and controller.log; may be called on
  /// several threads, one call per line.
  void out(const std::string& line) const;
  /// The same to stderr.
  void err(const std::string& line) const;

 private:
  void write(std::ostream& to, const std::string& line) const;

  std::ostream& out_;
  std::ostream& err_;
  std::shared_ptr<records::record_file> log_;
};

}  // namespace tandem::cli
