// Nearest-candidate search for misspellings.
#include "orchestration/config/suggest.h"

#include <algorithm>

namespace tandem::config {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  const std::size_t n = a.size(), m = b.size();
  std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1));
  for (std::size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[n][m];
}

std::optional<std::string> nearest(std::string_view typed, const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  std::size_t best_distance = 0;
  for (const auto& c : candidates) {
    const std::size_t dist = edit_distance(typed, c);
    if (!best || dist < best_distance) {
      best = c;
      best_distance = dist;
    }
  }
  // Close enough: a third of the longer word, at least 2 edits (short keys), and not a rewrite.
  const std::size_t longest = best ? std::max(typed.size(), best->size()) : 0;
  if (!best || best_distance > std::max<std::size_t>(2, longest / 3) || best_distance >= longest)
    return std::nullopt;
  return best;
}

}  // namespace tandem::config
