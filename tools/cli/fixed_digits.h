// A number as text with a fixed count of digits after the point ("12.35"): how the benchmark
// commands print their figures.
#pragma once

#include <cstdio>
#include <string>

namespace tandem::cli {

inline std::string fixed(double v, int digits) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}

}  // namespace tandem::cli
