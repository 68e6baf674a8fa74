// The bandwidth of the link between pinned host memory and a device: what an offload of the
// optimizer state to host memory, and its restore, can approach (about 55 GB/s each way on an
// H200's PCIe 5 link; a memory copy on the CPU backend).
#pragma once

#include <cstdint>

#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"

namespace tandem::gpu {

struct host_link_figures {
  double to_device_gb_per_s = 0;  ///< 1e9 bytes a second, pinned host memory to ctx.dev
  double to_host_gb_per_s = 0;    ///< and back
};

/// Copies `bytes` (> 0) between pinned host memory (host_staging_allocate) and ctx.dev's memory,
/// `rounds` (>= 1) times each way, and gives the fastest round of each way. Fails (out_of_memory,
/// device_error) naming what could not be allocated or copied; frees what it allocated.
result<host_link_figures> measure_host_link(const exec_context& ctx, std::int64_t bytes, int rounds);

}  // namespace tandem::gpu
