// stderr lines for the runtime.
#include "actors/bridge/log_line.hpp"

#include <cstdio>

#include "gpu/core/printable.h"

namespace tandem {

void log_line(const std::string& line) {
  // Text from peers (hostnames, error texts) is part of many lines: nothing in a line may end it or
  // reach the terminal as a command.
  const std::string text = gpu::printable(line, std::size_t{1} << 16) + "\n";
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
}

}  // namespace tandem
