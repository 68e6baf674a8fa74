// mbarriers in shared memory and the copy engine's bulk copies into shared memory (sm_90; nvcc
// only): what a producer thread needs to hand a block data that lands asynchronously. A barrier
// counts arrivals and, for the copy engine, transaction bytes; its phase completes when both reach
// zero, and a waiter names the phase by its parity (PTX ISA, "Parallel Synchronization and
// Communication Instructions: mbarrier", "Data Movement and Conversion Instructions:
// cp.async.bulk").
#pragma once

#include <cstdint>

namespace tandem::gpu::ops::cuda::async_copy {

/// The shared-memory address (bytes) of a generic pointer into shared memory.
__device__ __forceinline__ std::uint32_t shared_address(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// mbarriers (shared::cta): a producer's copies landing (cp.async or the copy engine's bytes) and
// the consumers' releases of a stage

__device__ __forceinline__ void mbarrier_init(std::uint32_t bar, std::uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

/// One arrival of this thread.
__device__ __forceinline__ void mbarrier_arrive(std::uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

/// One arrival of this thread once all of its earlier cp.async operations have completed.
__device__ __forceinline__ void mbarrier_arrive_on_copies(std::uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}

/// Whether the phase of parity `parity` of the barrier has completed (waiting a while in hardware).
__device__ __forceinline__ bool mbarrier_try_wait(std::uint32_t bar, std::uint32_t parity) {
  std::uint32_t done;
  asm volatile(
      "{\n.reg .pred p;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
}

/// Nanoseconds of the device's global timer.
__device__ __forceinline__ std::uint64_t global_nanoseconds() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(t));
  return t;
}

/// Calls done() until it is true. No wait of the kernels lasts more than microseconds; one that
/// outlasts 10 seconds means a lost arrival, and the kernel traps (the launch fails with an error
/// the caller reports) instead of hanging its stream.
template <class Done>
__device__ __forceinline__ void wait_or_trap(Done&& done) {
  if (done()) return;
  const std::uint64_t start = global_nanoseconds();
  while (!done())
    if (global_nanoseconds() - start > 10'000'000'000ull) __trap();
}

/// Waits until the phase of parity `parity` of the barrier has completed (wait_or_trap).
__device__ __forceinline__ void mbarrier_wait(std::uint32_t bar, std::uint32_t parity) {
  wait_or_trap([&] { return mbarrier_try_wait(bar, parity); });
}

/// Makes this thread's mbarrier initialisations visible to the other threads and to the async
/// proxy (the copy engine's completions); a block barrier follows.
__device__ __forceinline__ void mbarrier_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\nfence.proxy.async.shared::cta;\n" ::: "memory");
}

/// Sets the barrier's expected transaction bytes and arrives once (this thread).
__device__ __forceinline__ void mbarrier_arrive_expect_bytes(std::uint32_t bar, std::uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}

/// The bulk tensor copy engine: the box at coordinates (c0, c1, c2) of the 3-d tensor map `map`
/// (a __grid_constant__ kernel parameter) into shared memory at `dst`, counted on barrier `bar`.
__device__ __forceinline__ void tensor_load_3d(std::uint32_t dst, const void* map, int c0, int c1, int c2, std::uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(dst),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
      : "memory");
}

/// Brings the tensor map `map` (a __grid_constant__ kernel parameter) into the SM's descriptor
/// cache ahead of its first copy, so that copy does not wait for the descriptor's fetch.
__device__ __forceinline__ void prefetch_tensor_map(const void* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<std::uint64_t>(map)) : "memory");
}

}  // namespace tandem::gpu::ops::cuda::async_copy
