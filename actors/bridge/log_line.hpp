// One line on stderr for the runtime's logs (refused frames, joins, failures): written with a
// single call and flushed, so the lines of several threads and processes sharing a terminal or a
// log file do not interleave mid-line. A process can also have every line copied elsewhere (the
// controller: to its run's controller.log).
#pragma once

#include <functional>
#include <string>

namespace tandem {

/// Writes `line` and a newline to stderr at once; control characters, invalid UTF-8 and terminal
/// escapes in it are shown escaped (gpu/core/printable.h), so it stays one line.
void log_line(const std::string& line);

/// From now on every line log_line writes (made printable, without its newline) is also handed to
/// `copy`, one call at a time; an empty function stops the copies. Safe to call while other
/// threads log; `copy` must not call log_line.
void copy_log_lines(std::function<void(const std::string&)> copy);

}  // namespace tandem
