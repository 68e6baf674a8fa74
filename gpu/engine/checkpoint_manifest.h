// What the Gemma 4 engines derive alike from the checkpoint they load: each layout tensor's Hugging
// Face name as the checkpoint stores it, the refit manifest of their weight slab (in the layout's
// dtype: float32, or bfloat16 on CUDA), and the addresses of every tensor in that slab.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "gpu/core/slab.h"
#include "gpu/engine/weight_manifest.h"
#include "gpu/engine/weight_source.h"
#include "gpu/model/checkpoint.h"

namespace tandem::gpu {

/// names[i]: layout tensor i's name as loaded from the checkpoint (its canonical name when the
/// checkpoint has no files).
std::vector<std::string> checkpoint_names(const checkpoint& c);

/// One entry per layout tensor in its dtype, in layout order, under `names`.
weight_manifest layout_manifest(const model_layout& layout, const std::vector<std::string>& names);

/// Where each layout tensor lives in the slab `s` of that layout: addresses[i] holds layout.tensors[i].
std::vector<const std::byte*> slab_addresses(const slab& s, const model_layout& layout);

}  // namespace tandem::gpu
