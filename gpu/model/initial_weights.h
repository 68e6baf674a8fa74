// Gemma 4's initialisation, as a model starts before any training: every matrix and embedding
// drawn from N(0, initializer_range²), every norm scale, layer_scalar and router scale 1. The
// values are a pure function of (seed, tensor, element): element i of layout tensor k is the
// Box-Muller normal of two SplitMix64 draws at (seed, k, i), so any machine, any chunking and any
// device get the same bits. `tandem init` writes them to a checkpoint; benchmarks fill a slab
// with them directly.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "gpu/core/exec_context.h"
#include "gpu/core/slab.h"
#include "gpu/core/status.h"
#include "gpu/model/layout.h"

namespace tandem::gpu {

/// initializer_range of a config.json text: its value, 0.02 when absent; invalid_argument naming
/// `where` when it is not a positive number.
result<double> initializer_range(const std::string& config_json, const std::string& where);

/// Elements [first, first + out.size()) of layout tensor `k` (`entry`), as float32.
void initial_values(const tensor_entry& entry, std::size_t k, std::uint64_t seed, double std_dev, std::int64_t first,
                    std::span<float> out);

/// Every tensor of `layout` written into `weights` (a parameter slab of that layout on ctx's
/// device) with the values above, rounded to the layout's storage type (float32 keeps them), through
/// host memory 64 MiB at a time.
status fill_initial_weights(const exec_context& ctx, const model_layout& layout, const slab& weights, std::uint64_t seed,
                            double std_dev);

}  // namespace tandem::gpu
