// The dtype of a C++ element type, for typed APIs that derive dtypes (and byte counts) from spans.
// Bytes (std::byte, std::uint8_t) are dtype::uint8: a span of them moves as itself, never as
// words of another type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "gpu/core/dtype.h"
#include "gpu/core/half.h"

namespace tandem::gpu {

template <class T>
constexpr dtype dtype_of() {
  using U = std::remove_const_t<T>;
  if constexpr (std::is_same_v<U, float>) return dtype::float32;
  else if constexpr (std::is_same_v<U, double>) return dtype::float64;
  else if constexpr (std::is_same_v<U, std::int32_t>) return dtype::int32;
  else if constexpr (std::is_same_v<U, std::byte> || std::is_same_v<U, std::uint8_t>) return dtype::uint8;
  else if constexpr (std::is_same_v<U, bfloat16>) return dtype::bfloat16;
  else {
    static_assert(std::is_same_v<U, float16>, "no dtype for this element type");
    return dtype::float16;
  }
}

}  // namespace tandem::gpu
