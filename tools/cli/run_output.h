// What `tandem run` prints, and what its controller.log holds. On a terminal (isatty): the lines as
// they are, each step as its compact line, and while a step generates one progress bar line
// (progress_bar.h) redrawn in place with '\r', erased before the next line is written. Anywhere
// else (a pipe, a file, CI) and in controller.log: plain lines, each prefixed with its UTC
// timestamp (log_timestamp.h), each step in its full form; no bar and no '\r'. Every line is made
// printable (control characters shown escaped, gpu/core/printable.h) and written in one call.
// While a run_output lives, the runtime's own stderr lines (actors/bridge/log_line.hpp: "tandem
// controller: ...") are appended to controller.log too, timestamped. A controller.log that cannot
// be written keeps its whole lines and takes no more (orchestration/records/record_file.h); the
// run reads its failure from run_files::failure(). Safe to call from several threads.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>

#include "orchestration/records/record_file.h"

namespace tandem::cli {

/// Whether `s` is this process's std::cout or std::cerr and that descriptor is a terminal.
bool is_terminal(const std::ostream& s);

class run_output {
 public:
  using clock = std::function<std::chrono::system_clock::time_point()>;

  /// `out_terminal`, `err_terminal`: whether each stream is a terminal (is_terminal); `log`:
  /// controller.log, or null for none; `now`: the time of the timestamps.
  run_output(std::ostream& out, bool out_terminal, std::ostream& err, bool err_terminal,
             std::shared_ptr<records::record_file> log, clock now = std::chrono::system_clock::now);
  ~run_output();  // the runtime's lines are no longer copied
  run_output(const run_output&) = delete;
  run_output& operator=(const run_output&) = delete;

  /// One line to stdout and controller.log.
  void out(const std::string& line);
  /// The same to stderr.
  void err(const std::string& line);
  /// A step's line: `compact` on a terminal, `full` elsewhere and in controller.log.
  void step(const std::string& compact, const std::string& full);
  /// Generation's advance: on a terminal, the bar for `done` of `total` trajectories, drawn over
  /// the last one; elsewhere nothing.
  void generation(std::size_t done, std::size_t total);

  /// Cells of the bar between its brackets.
  static constexpr std::size_t bar_width = 24;

 private:
  void write(std::ostream& to, bool terminal, const std::string& terminal_text, const std::string& log_text);
  void erase_bar();  // with mutex_ held

  std::ostream& out_;
  std::ostream& err_;
  const bool out_terminal_;
  const bool err_terminal_;
  std::shared_ptr<records::record_file> log_;
  clock now_;
  std::mutex mutex_;
  bool bar_drawn_ = false;  // guarded by mutex_: the bar is the last thing on stdout's line
};

}  // namespace tandem::cli
