// Element types of tensors and their sizes.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace tandem::gpu {

/// float64 exists for the CPU reference (finite differences, op references); models never use it.
/// int32 holds token ids, positions, sequence offsets and expert indices. uint8 holds opaque bytes
/// (refit buckets on the communicator, std::byte spans); no op computes in it and no collective
/// reduces it.
enum class dtype { float32, bfloat16, float16, float64, int32, uint8 };

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

/// Parses a canonical name or a safetensors / torch spelling ("F32", "BF16", "U8", "torch.bfloat16").
std::optional<dtype> parse_dtype(std::string_view name);

}  // namespace tandem::gpu
