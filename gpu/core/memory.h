// Raw memory of a device: allocation, release and copies between host and device. The CPU
// backend's "device" memory is aligned host memory; the CUDA backend uses cudaMalloc and pinned
// host memory. Every call reports failure as a status and leaves nothing allocated.
#pragma once

#include <cstdint>

#include "gpu/core/device.h"
#include "gpu/core/exec_context.h"
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

/// Stream-ordered memory of ctx.dev: `bytes`, zero-filled, usable by work on ctx.stream (on the
/// CPU: device_allocate). Free it with device_free_ordered on the same stream.
result<void*> device_allocate_ordered(const exec_context& ctx, std::int64_t bytes);
void device_free_ordered(const device& dev, stream_ref stream, void* p);
/// The same without the zero fill on CUDA (contents unspecified).
result<void*> device_allocate_ordered_unfilled(const exec_context& ctx, std::int64_t bytes);

/// Copies ordered on ctx.stream, after the work enqueued there: within ctx.dev's memory (returns
/// once enqueued), and between it and host memory (returns once the copy is complete, so the
/// host side may be read or reused).
status copy_on_device(const exec_context& ctx, void* dst, const void* src, std::int64_t bytes);
status copy_to_host(const exec_context& ctx, void* host, const void* device_src, std::int64_t bytes);
status copy_to_device(const exec_context& ctx, void* device_dst, const void* host, std::int64_t bytes);
/// Enqueues a copy of `bytes` from host staging memory (host_staging_allocate(ctx.dev): pinned
/// on CUDA) into ctx.dev's memory on ctx.stream and returns at once, without waiting: the staging
/// bytes must stay unchanged until the stream has passed the copy (a later synchronisation with
/// it: a copy to the host, wait_for_device). On the CPU a memcpy.
status enqueue_copy_to_device(const exec_context& ctx, void* device_dst, const void* staging_src, std::int64_t bytes);
/// Enqueues a copy of `bytes` of ctx.dev's memory into host staging memory on ctx.stream and
/// returns at once: the staging bytes are the copy's only once the host has waited for a point of
/// the stream after it (a stream_marker placed after it, a synchronous copy, wait_for_device).
/// On the CPU a memcpy.
status enqueue_copy_to_host(const exec_context& ctx, void* staging_dst, const void* device_src, std::int64_t bytes);
/// Zeroes `bytes` at `p` in ctx.dev's memory, ordered on ctx.stream.
status fill_zero(const exec_context& ctx, void* p, std::int64_t bytes);

/// Returns once every piece of work on ctx.dev is complete, on every stream (the synchronous
/// copies above and the slabs' transitions run outside ctx.stream): the boundary between the
/// stream-ordered work of an engine and whatever touches its memory next. A no-op on the CPU.
status wait_for_device(const exec_context& ctx);

/// The stream-ordered allocator keeps the memory its buffers free, for the next step's; this
/// waits for the device and hands that memory back to it, so another allocation (a slab, a
/// colocated engine's cache) can have it. An allocation of device_allocate that finds the device
/// full does the same once before it fails. A no-op on the CPU.
status release_cached_memory(const exec_context& ctx);

/// Bytes of `dev`'s memory in use, as the device counts it: every allocation on it, this
/// process's and others', the CUDA context and the allocator's cache included (total − free).
/// unsupported on the CPU, whose "device" memory is the host's.
result<std::int64_t> device_memory_in_use(const device& dev);

}  // namespace tandem::gpu
