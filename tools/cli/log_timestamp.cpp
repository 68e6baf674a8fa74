// ISO 8601 UTC timestamps for log lines.
#include "tools/cli/log_timestamp.h"

#include <cstddef>
#include <cstdio>
#include <ctime>

namespace tandem::cli {

std::string log_timestamp(std::chrono::system_clock::time_point t) {
  // floor, not duration_cast: a time before 1970 still truncates towards the earlier millisecond.
  const auto ms = std::chrono::floor<std::chrono::milliseconds>(t.time_since_epoch()).count();
  const std::time_t seconds = static_cast<std::time_t>(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
  const int millis = static_cast<int>(ms - static_cast<long long>(seconds) * 1000);  // 0 .. 999
  std::tm utc{};
  ::gmtime_r(&seconds, &utc);
  char text[32];
  const std::size_t n = std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &utc);
  char fraction[16];
  std::snprintf(fraction, sizeof fraction, ".%03dZ", millis);
  return std::string(text, n) + fraction;
}

std::string timestamped(std::chrono::system_clock::time_point t, const std::string& line) {
  return log_timestamp(t) + " " + line;
}

}  // namespace tandem::cli
