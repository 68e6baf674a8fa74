// The refit manifest: the ordered tensors {name, shape, dtype} of the policy's weights, as the
// policy sends it once at start-up and every rollout worker checks it against its own layout
// (gpu/engine/weight_manifest.h cuts it into buckets; the control plane carries it as is).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plain/dtype.h"
#include "plain/fields.h"

namespace tandem::plain {

struct manifest_entry {
  static constexpr const char* type_name = "manifest_entry";
  std::string name;                 ///< Hugging Face name, e.g. "model.language_model.layers.0.mlp.up_proj.weight"
  std::vector<std::int64_t> shape;
  dtype type = dtype::bfloat16;

  /// Bytes of the tensor: its elements times the element size.
  std::int64_t bytes() const {
    std::int64_t n = static_cast<std::int64_t>(size_of(type));
    for (const std::int64_t d : shape) n *= d;
    return n;
  }
  bool operator==(const manifest_entry&) const = default;

  template <class F>
  static decltype(auto) fields(F&& f, manifest_entry& x) {
    return f(named("name", x.name), named("shape", x.shape), named("dtype", x.type));
  }
};

using weight_manifest = std::vector<manifest_entry>;

}  // namespace tandem::plain
