// Integer arithmetic on recipe values that cannot wrap: each result is the exact value or nothing.
// Every integer rule and every number derived from a recipe goes through these, so a value the
// schema let through can never overflow on its way to a plan or the wire.
#pragma once

#include <cstdint>
#include <optional>

namespace tandem::config {

/// a * b, or nullopt when the product does not fit in int64.
inline std::optional<std::int64_t> checked_mul(std::int64_t a, std::int64_t b) {
  std::int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}

/// a + b, or nullopt when the sum does not fit in int64.
inline std::optional<std::int64_t> checked_add(std::int64_t a, std::int64_t b) {
  std::int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) return std::nullopt;
  return out;
}

/// The largest token count a packed batch's int32 offsets can address.
inline constexpr std::int64_t max_packed_tokens = 2147483647;

}  // namespace tandem::config
