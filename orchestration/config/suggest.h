// "Did you mean ...?" for misspelt keys and choices.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::config {

/// Optimal-string-alignment distance (Levenshtein plus adjacent transpositions).
std::size_t edit_distance(std::string_view a, std::string_view b);

/// The candidate closest to `typed`, if it is close enough to be a likely misspelling.
std::optional<std::string> nearest(std::string_view typed, const std::vector<std::string>& candidates);

}  // namespace tandem::config
