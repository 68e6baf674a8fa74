// Raw memory of a device: allocation, release and copies between host and device. The CPU
// backend's "device" memory is aligned host memory; the CUDA backend uses cudaMalloc and pinned
// host memory. Every call reports failure as a status and leaves nothing allocated.
#pragma once

#include <cstdint>

#include "gpu/core/device.h"
#include "gpu/core/status.h"

namespace tandem::gpu {

/// `bytes` of memory on `dev` (64-byte aligned on the CPU, 256 on CUDA), zero-filled.
result<void*> device_allocate(device dev, std::int64_t bytes);
void device_free(device dev, void* p);

/// Host memory suited to copies with `dev` (pinned for CUDA).
result<void*> host_staging_allocate(device dev, std::int64_t bytes);
void host_staging_free(device dev, void* p);

/// Copies between a device buffer and a host buffer, in either direction; synchronous.
status copy_to_host(device dev, void* host, const void* device_src, std::int64_t bytes);
status copy_to_device(device dev, void* device_dst, const void* host, std::int64_t bytes);

}  // namespace tandem::gpu
