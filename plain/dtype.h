// Element types of tensors: the one enum every layer uses (gpu/core/dtype.h re-exports it), its
// element sizes and names. Its values are wire codes too (a refit manifest's entries carry them),
// so an existing value never changes and a new one goes at the end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tandem::plain {

/// float64 exists for the CPU reference (finite differences, op references); models never use it.
/// int32 holds token ids, positions, sequence offsets and expert indices. uint8 holds opaque bytes
/// (refit buckets on the communicator, std::byte spans); no op computes in it and no collective
/// reduces it.
enum class dtype : std::uint8_t { float32 = 0, bfloat16 = 1, float16 = 2, float64 = 3, int32 = 4, uint8 = 5 };

/// Whether `t` is one of the values above (a decoded code may be anything).
constexpr bool known(dtype t) { return static_cast<std::uint8_t>(t) <= static_cast<std::uint8_t>(dtype::uint8); }

/// Bytes per element.
constexpr std::size_t size_of(dtype t) {
  switch (t) {
    case dtype::float32: return 4;
    case dtype::bfloat16: return 2;
    case dtype::float16: return 2;
    case dtype::float64: return 8;
    case dtype::int32: return 4;
    case dtype::uint8: return 1;
  }
  return 0;
}

/// Canonical name ("float32", "bfloat16", "float16", "float64", "int32", "uint8").
constexpr std::string_view to_string(dtype t) {
  switch (t) {
    case dtype::float32: return "float32";
    case dtype::bfloat16: return "bfloat16";
    case dtype::float16: return "float16";
    case dtype::float64: return "float64";
    case dtype::int32: return "int32";
    case dtype::uint8: return "uint8";
  }
  return "?";
}

}  // namespace tandem::plain
