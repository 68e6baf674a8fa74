// The model both `tandem bench` commands run: DIR's config with the random initial weights of
// `tandem init` (gpu/model/initial_weights.h) filled straight into a slab on the device, without
// reading DIR's weights.
#pragma once

#include <cstdint>
#include <filesystem>

#include "gpu/core/device.h"
#include "gpu/core/dtype.h"
#include "gpu/core/slab.h"
#include "gpu/core/status.h"
#include "gpu/model/checkpoint.h"

namespace tandem::cli {

struct bench_model {
  gpu::checkpoint source;  ///< DIR's config and layout in `type`
  gpu::slab weights;       ///< the layout's bytes on the device, initialised
};

/// An error names what failed: the config, the slab, the fill.
gpu::result<bench_model> random_bench_model(const std::filesystem::path& dir, gpu::dtype type, const gpu::device& dev,
                                            std::uint64_t seed);

}  // namespace tandem::cli
