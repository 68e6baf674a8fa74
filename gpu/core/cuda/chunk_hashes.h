// The per-chunk hashes of the chunked XXH3 (chunked_hash.h) computed on a CUDA device, for
// device_hash.cpp; a build with CUDA only.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"
#include "gpu/core/xxh3_lanes.h"

namespace tandem::gpu::cuda {

/// How the kernel may load a stripe that one segment holds: 16 bytes at a time where every
/// segment's base less its stream offset is 16-byte aligned, 8 where 8, else byte by byte.
int stripe_alignment(const xxh3::segments& host_view);

/// Enqueues on ctx.stream: out[i] (device memory, U64 [chunks]) = XXH3_64bits of chunk i of the
/// stream `device_view` describes (its base and start arrays in device memory, the bytes on
/// ctx.dev), for i < chunks, where every one of those chunks is longer than 240 bytes (the caller
/// hashes a shorter last chunk on the host). Eight threads a chunk, one per accumulator
/// (xxh3_lanes.h), loading `alignment` (16, 8 or 1: stripe_alignment) bytes at a time. Fails
/// (device_error) naming the kernel when the launch fails.
status enqueue_chunk_hashes(const exec_context& ctx, const xxh3::segments& device_view, std::uint64_t length,
                            std::uint64_t chunks, int alignment, std::uint64_t* out);

}  // namespace tandem::gpu::cuda
