// A child process that answers one line per line: `/bin/sh -c COMMAND` with its stdin and stdout
// on pipes (its stderr is the parent's), in a process group of its own so that killing it kills
// whatever it started. What the external environment talks to.
//
//   not started --exchange()--> running --exchange(): a line back--> running
//   running --no line before the deadline, a line too long, end of output, a write that fails-->
//       killed and reaped (the error says which); the next exchange() starts a fresh process
//
// Not thread-safe: one caller at a time (the external environment keeps one per worker).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <string>

namespace tandem {

class line_process {
 public:
  explicit line_process(std::string command);
  ~line_process();
  line_process(const line_process&) = delete;
  line_process& operator=(const line_process&) = delete;

  /// Writes `line` and a newline, and reads one line back (without its newline) within
  /// `timeout`. False (and `problem` says why) when it could not; the process is then gone.
  bool exchange(const std::string& line, std::chrono::milliseconds timeout, std::string& answer, std::string& problem);

  /// The longest answer line taken (longer ones are refused as garbage).
  static constexpr std::size_t max_line_bytes = std::size_t{1} << 20;

 private:
  bool start(std::string& problem);
  /// Kills (SIGKILL) and reaps the process; how it ended, for an error message.
  std::string stop();
  /// Closes the pipes of a process that is gone (reaped) and marks none running.
  void forget();
  bool write_all(const std::string& bytes, std::string& problem);

  std::string command_;
  pid_t pid_ = -1;
  int to_child_ = -1;    // its stdin
  int from_child_ = -1;  // its stdout
  std::string buffered_;  // bytes read past the last line
};

}  // namespace tandem
