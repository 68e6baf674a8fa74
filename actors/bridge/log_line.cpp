// stderr lines for the runtime.
#include "actors/bridge/log_line.hpp"

#include <cstdio>
#include <mutex>
#include <utility>

#include "gpu/core/printable.h"

namespace tandem {
namespace {

std::mutex copy_mutex;
std::function<void(const std::string&)> copy_to;  // guarded by copy_mutex

}  // namespace

void log_line(const std::string& line) {
  // Text from peers (hostnames, error texts) is part of many lines: nothing in a line may end it or
  // reach the terminal as a command.
  const std::string printable = gpu::printable(line, std::size_t{1} << 16);
  const std::string text = printable + "\n";
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
  std::lock_guard<std::mutex> lock(copy_mutex);
  if (copy_to) copy_to(printable);
}

void copy_log_lines(std::function<void(const std::string&)> copy) {
  std::lock_guard<std::mutex> lock(copy_mutex);
  copy_to = std::move(copy);
}

}  // namespace tandem
