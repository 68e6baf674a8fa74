// Thread-block clusters of Hopper (sm_90; nvcc only): a block's rank in its cluster, the address
// of a peer block's shared memory (distributed shared memory), stores into it that count on the
// peer's mbarrier, arrivals on a peer's mbarrier, waits that see a peer's writes, and the cluster
// barrier (PTX ISA, "Cluster", "mapa", "st.async", "mbarrier", "barrier.cluster").
//
// A block may wait only on its own mbarriers; a peer arrives on them (or completes their
// transaction bytes) from afar. Both blocks run the same kernel with the same shared-memory layout,
// so a peer's buffer sits at the local buffer's address mapped to the peer's rank.
#pragma once

#include <cstdint>

#include "gpu/ops/cuda/mbarrier.cuh"

namespace tandem::gpu::ops::cuda::cluster {

/// This block's rank in its cluster.
__device__ __forceinline__ std::uint32_t rank() {
  std::uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}

/// The shared::cluster address of the block of rank `peer`'s copy of the local shared address `local`.
__device__ __forceinline__ std::uint32_t peer_address(std::uint32_t local, std::uint32_t peer) {
  std::uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(local), "r"(peer));
  return r;
}

/// Stores 16 bytes at a peer's shared address `dst` (16-byte aligned) and completes 16 transaction
/// bytes on the peer's mbarrier `bar` (a shared::cluster address) once they have landed.
__device__ __forceinline__ void store_counted(std::uint32_t dst, float x, float y, float z, float w, std::uint32_t bar) {
  asm volatile("st.async.weak.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];\n" ::"r"(dst),
               "r"(__float_as_uint(x)), "r"(__float_as_uint(y)), "r"(__float_as_uint(z)), "r"(__float_as_uint(w)), "r"(bar)
               : "memory");
}

/// One arrival on a peer's mbarrier `bar` (a shared::cluster address), ordered after this thread's
/// earlier reads and writes for the peer that waits on it (release at cluster scope).
__device__ __forceinline__ void arrive_remote(std::uint32_t bar) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

/// Sets the local barrier's expected transaction bytes and arrives once (this thread), at cluster
/// scope: the bytes come from a peer's store_counted.
__device__ __forceinline__ void arrive_expect_bytes(std::uint32_t bar, std::uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.release.cluster.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}

/// Whether the phase of parity `parity` of the local barrier `bar` has completed, acquiring at
/// cluster scope what the peers that arrived on it had written or read before.
__device__ __forceinline__ bool try_wait(std::uint32_t bar, std::uint32_t parity) {
  std::uint32_t done;
  asm volatile(
      "{\n.reg .pred p;\n"
      "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
}

/// Waits for the phase of parity `parity` of the local barrier `bar` (async_copy::wait_or_trap: a
/// wait past 10 seconds is a lost arrival and traps instead of hanging the stream).
__device__ __forceinline__ void wait(std::uint32_t bar, std::uint32_t parity) {
  async_copy::wait_or_trap([&] { return try_wait(bar, parity); });
}

/// Every thread of every block of the cluster: this thread's earlier reads and writes (its
/// mbarrier initialisations too) are visible to the cluster's threads after their sync.
__device__ __forceinline__ void sync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}

}  // namespace tandem::gpu::ops::cuda::cluster
