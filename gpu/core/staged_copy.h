// Copies between host memory and a device's memory that also convert element types or stream
// the bytes to a consumer, through a bounded host staging buffer (64 MiB at a time), so a
// multi-gigabyte tensor never needs a host copy of its own size. On the CPU they run in place,
// without staging. Every copy is ordered on the context's stream and complete when the call
// returns.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>

#include "gpu/core/dtype.h"
#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"

namespace tandem::gpu {

/// `count` elements of host memory at `src` (`from`) converted into ctx.dev's memory at `dst`
/// (`to`); both types is_storage_float (convert.h).
status convert_to_device(const exec_context& ctx, const void* src, dtype from, void* dst, dtype to, std::int64_t count);

/// `count` elements of ctx.dev's memory at `src` (`from`) converted into ctx.dev's memory at
/// `dst` (`to`), through the host; the ranges do not overlap.
status convert_on_device(const exec_context& ctx, const void* src, dtype from, void* dst, dtype to, std::int64_t count);

/// `bytes` of ctx.dev's memory at `src` handed to `sink` in order, in pieces of at most 64 MiB
/// (each a multiple of 64 bytes but the last), each valid during its call.
status read_from_device(const exec_context& ctx, const void* src, std::int64_t bytes,
                        const std::function<void(std::span<const std::byte>)>& sink);

}  // namespace tandem::gpu
