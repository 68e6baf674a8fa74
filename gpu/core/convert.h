// Element conversion between the floating-point storage types of weights: float32, bfloat16 and
// float16. Widening is exact; narrowing rounds to nearest, ties to even (half.h). Source and
// destination may have any alignment (tensors in a safetensors file are packed back to back).
#pragma once

#include <cstdint>

#include "gpu/core/dtype.h"

namespace tandem::gpu {

/// True for float32, bfloat16 and float16.
constexpr bool is_storage_float(dtype t) {
  return t == dtype::float32 || t == dtype::bfloat16 || t == dtype::float16;
}

/// Converts `count` elements of `from` at `src` into `to` at `dst` (both is_storage_float; the
/// ranges do not overlap). Large counts run on the OpenMP threads.
void convert_elements(const void* src, dtype from, void* dst, dtype to, std::int64_t count);

}  // namespace tandem::gpu
