// Warpgroup matrix instructions of Hopper (sm_90a; nvcc only; private to the attention kernels):
// shared-memory matrix descriptors for the 128-byte swizzled layout, the wgmma.mma_async shapes
// the kernels use, the fences, commits and waits around them (PTX ISA, "Asynchronous Warpgroup
// Level Matrix Multiply-Accumulate") and register budgets; mbarriers and the copy engine come
// from mbarrier.cuh.
//
// Layout of a [rows][cols] bf16 tile in shared memory ("sw128"): cols / 64 column blocks, each
// [rows][64] (rows of 128 bytes), block cb at byte cb · rows · 128; in it, the 16-byte chunk c of
// row r sits at chunk c ^ (r & 7). Tiles start 1024-byte aligned, so the hardware's swizzle (it
// XORs address bits 4-6 with bits 7-9) reads what the loaders wrote.
//   * As an operand with K along cols ("K-major", no transpose): 8-row groups 1024 bytes apart
//     (the stride byte offset); a k-step of 16 columns starts 32 bytes further into the row.
//   * As B with N along cols and K along rows ("N-major", transposed): 64 N-columns of a column
//     block contiguous, the next 64 at the leading byte offset (rows · 128), 8-row K groups 1024
//     bytes apart; a k-step of 16 rows starts 2048 bytes further.
//
// Accumulator ownership of m64nN (f32), for thread 32w + L of a warpgroup, lane L = 4g + t: warp w
// owns rows 16w .. 16w + 15, and d[4i + e] is the m16n8 C fragment of n-tile i:
//   d[4i] = C[16w + g][8i + 2t]  d[4i + 1] = C[16w + g][8i + 2t + 1]
//   d[4i + 2] = C[16w + g + 8][8i + 2t]  d[4i + 3] = C[16w + g + 8][8i + 2t + 1]
// and an A operand from registers is the m16n8k16 A fragment of the warp's 16 rows (see
// attention_mma_common.cuh), so the C fragments of n-tiles 2j, 2j + 1 are A's k-step j.
#pragma once

#include <cstdint>

#include "gpu/ops/cuda/mbarrier.cuh"

namespace tandem::gpu::ops::cuda::attn::wgmma {

/// Descriptor of a 128-byte swizzled operand at shared address `addr` (bytes).
__device__ __forceinline__ std::uint64_t sw128_desc(std::uint32_t addr, std::uint32_t leading_bytes, std::uint32_t stride_bytes) {
  std::uint64_t d = (addr & 0x3FFFFu) >> 4;
  d |= static_cast<std::uint64_t>((leading_bytes >> 4) & 0x3FFFu) << 16;
  d |= static_cast<std::uint64_t>((stride_bytes >> 4) & 0x3FFFu) << 32;
  d |= std::uint64_t{1} << 62;  // 128-byte swizzle
  return d;
}

/// Orders this thread's register and shared-memory writes before the warpgroup's next wgmma.
__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }

/// Makes ordinary (generic-proxy) shared-memory writes, cp.async's included, visible to wgmma
/// (the async proxy): each writing thread runs it before the barrier that publishes the tile.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// mbarriers and the copy engine (mbarrier.cuh), under the names the attention kernels use
using async_copy::global_nanoseconds;
using async_copy::mbarrier_arrive;
using async_copy::mbarrier_arrive_expect_bytes;
using async_copy::mbarrier_arrive_on_copies;
using async_copy::mbarrier_init;
using async_copy::mbarrier_init_fence;
using async_copy::mbarrier_try_wait;
using async_copy::mbarrier_wait;
using async_copy::prefetch_tensor_map;
using async_copy::tensor_load_3d;

/// Register budget of this warp's warpgroup from here on (sm_90a; the kernel needs a register cap
/// at entry, __launch_bounds__(threads, 1)).
template <int N>
__device__ __forceinline__ void registers_down() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N)); }
template <int N>
__device__ __forceinline__ void registers_up() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N)); }

/// Keeps the compiler from moving reads or writes of accumulator registers across a wait.
template <int N>
__device__ __forceinline__ void fence_registers(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}

/// d[32] (+)= A·B, m64n64k16, A and B from shared memory (K-major both), bf16 in, f32 accumulate.
__device__ __forceinline__ void mma_ss_m64n64k16(float (&d)[32], std::uint64_t desc_a, std::uint64_t desc_b, bool accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "%32, %33, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(desc_a), "l"(desc_b), "r"(static_cast<int>(accumulate)));
}

/// d[16] (+)= A·B, m64n32k16, A and B from shared memory (K-major both), bf16 in, f32 accumulate.
__device__ __forceinline__ void mma_ss_m64n32k16(float (&d)[16], std::uint64_t desc_a, std::uint64_t desc_b, bool accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, "
      "%16, %17, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "l"(desc_a), "l"(desc_b), "r"(static_cast<int>(accumulate)));
}

/// d[128] += A·B, m64n256k16, A from registers (a[4]: the m16n8k16 A fragment of this warp's 16 rows),
/// B from shared memory N-major (transposed), bf16 in, f32 accumulate.
__device__ __forceinline__ void mma_rs_m64n256k16_tn(float (&d)[128], const std::uint32_t (&a)[4], std::uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
      "{%128, %129, %130, %131}, %132, p, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
        "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
        "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
        "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
        "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
}

/// d[64] += A·B, m64n128k16, A from registers (a[4]: the m16n8k16 A fragment of this warp's 16 rows),
/// B from shared memory N-major (transposed), bf16 in, f32 accumulate.
__device__ __forceinline__ void mma_rs_m64n128k16_tn(float (&d)[64], const std::uint32_t (&a)[4], std::uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "{%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
}

}  // namespace tandem::gpu::ops::cuda::attn::wgmma
