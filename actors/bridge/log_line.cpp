// stderr lines for the runtime.
#include "actors/bridge/log_line.hpp"

#include <cstdio>

namespace tandem {

void log_line(const std::string& line) {
  const std::string text = line + "\n";
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
}

}  // namespace tandem
