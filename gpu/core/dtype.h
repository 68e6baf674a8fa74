// Element types of tensors and their sizes.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "plain/dtype.h"

namespace tandem::gpu {

/// The element types, their sizes and names: one definition for every layer (plain/dtype.h).
using plain::dtype;
using plain::size_of;
using plain::to_string;

/// Parses a canonical name or a safetensors / torch spelling ("F32", "BF16", "U8", "torch.bfloat16").
std::optional<dtype> parse_dtype(std::string_view name);

}  // namespace tandem::gpu
