// The generation progress bar (progress_bar.h).
#include "tools/cli/progress_bar.h"

#include <algorithm>

namespace tandem::cli {

std::string progress_bar(std::size_t width, std::size_t done, std::size_t total) {
  done = std::min(done, total);
  const std::size_t filled = total == 0 ? 0 : width * done / total;
  return "generating [" + std::string(filled, '#') + std::string(width - filled, '.') + "] " + std::to_string(done) + "/" +
         std::to_string(total) + " trajectories";
}

}  // namespace tandem::cli
