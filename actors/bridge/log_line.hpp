// One line on stderr for the runtime's logs (refused frames, joins, failures): written with a
// single call and flushed, so the lines of several threads and processes sharing a terminal or a
// log file do not interleave mid-line.
#pragma once

#include <string>

namespace tandem {

/// Writes `line` and a newline to stderr at once; control characters, invalid UTF-8 and terminal
/// escapes in it are shown escaped (gpu/core/printable.h), so it stays one line.
void log_line(const std::string& line);

}  // namespace tandem
