// The bar `tandem run` redraws in place on a terminal while a step generates:
//   generating [############............] 12/16 trajectories
#pragma once

#include <cstddef>
#include <string>

namespace tandem::cli {

/// The bar for `done` of `total` trajectories, `width` cells between the brackets: '#' for the
/// share done (rounded down; every cell only when all are done), '.' for the rest. `done` beyond
/// `total` counts as `total`; a total of 0 shows an empty bar ("0/0").
std::string progress_bar(std::size_t width, std::size_t done, std::size_t total);

}  // namespace tandem::cli
