// Parsing of dtype names.
#include "gpu/core/dtype.h"

namespace tandem::gpu {

std::optional<dtype> parse_dtype(std::string_view name) {
  if (name.starts_with("torch.")) name.remove_prefix(6);
  if (name == "float32" || name == "F32" || name == "float") return dtype::float32;
  if (name == "bfloat16" || name == "BF16") return dtype::bfloat16;
  if (name == "float16" || name == "F16" || name == "half") return dtype::float16;
  if (name == "float64" || name == "F64" || name == "double") return dtype::float64;
  if (name == "int32" || name == "I32") return dtype::int32;
  if (name == "uint8" || name == "U8") return dtype::uint8;
  return std::nullopt;
}

}  // namespace tandem::gpu
