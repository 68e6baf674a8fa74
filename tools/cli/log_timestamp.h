// The time a log line was written, as its prefix: ISO 8601 in UTC with milliseconds,
// "2026-12-02T01:02:03.456Z", so lines of several machines and time zones sort and compare.
#pragma once

#include <chrono>
#include <string>

namespace tandem::cli {

/// `t` as "YYYY-MM-DDTHH:MM:SS.mmmZ" (UTC; the milliseconds truncated, not rounded).
std::string log_timestamp(std::chrono::system_clock::time_point t);

/// `line` as a log file holds it: its timestamp, a space, the line.
std::string timestamped(std::chrono::system_clock::time_point t, const std::string& line);

}  // namespace tandem::cli
