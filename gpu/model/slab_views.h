// Addressing model state through the layout table: the view of one tensor inside a slab laid out
// by build_layout() (parameters, gradients, optimizer moments all share the table's offsets).
#pragma once

#include "gpu/core/slab.h"
#include "gpu/model/layout.h"

namespace tandem::gpu {

/// The tensor `entry` inside `s`, in `type` (the slab's element type, which may differ from the
/// table's: a float32 master-weight slab and a bfloat16 weight slab share one layout). Fails when
/// the slab is not resident or too small for the table.
inline result<tensor> view_in(const slab& s, const tensor_entry& entry, dtype type) {
  return s.view_of(entry.offset_elements * static_cast<std::int64_t>(size_of(type)), type, entry.shape);
}

/// Bytes a slab needs to hold every tensor of `layout` in `type` (padding included).
inline std::int64_t slab_bytes(const model_layout& layout, dtype type) {
  return layout.total_elements * static_cast<std::int64_t>(size_of(type));
}

}  // namespace tandem::gpu
