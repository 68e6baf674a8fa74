// The chunked XXH3-64 (chunked_hash.h) of bytes where they are: on the CPU the host's hash; on a
// CUDA device every chunk longer than 240 bytes hashed by a kernel (cuda/chunk_hashes.h), the
// hashes read back (8 bytes a MiB) and finished on the host, so bytes in device memory are
// checked without bringing them to the host: a refit bucket received into device memory, or a
// model's weights (ranges, one a tensor, hashed as their concatenation). The same value either
// way, bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"

namespace tandem::gpu {

/// `bytes` bytes at `data`.
struct byte_range {
  const std::byte* data = nullptr;
  std::int64_t bytes = 0;
};

/// chunked_xxh3 of the ranges' bytes concatenated in order, all in memory of ctx.dev (host memory
/// on the CPU; on CUDA device memory, any alignment and sizes). Waits for ctx.stream's work before
/// it (the bytes' writers) and for its own. Fails naming what failed: invalid_argument for a
/// negative size or a null address with bytes (naming the range), unsupported on CUDA in a build
/// without it, out_of_memory or device_error from the device (a table of the ranges and the
/// hashes' 8 bytes a chunk, the kernel, the read-back).
result<std::uint64_t> chunked_xxh3_on(const exec_context& ctx, std::span<const byte_range> ranges);

/// The same of one range.
result<std::uint64_t> chunked_xxh3_on(const exec_context& ctx, const std::byte* data, std::int64_t bytes);

}  // namespace tandem::gpu
