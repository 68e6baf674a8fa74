// Sums of squares by range on CUDA, deterministic without atomics:
//
//   chunk_sums_kernel      one block per chunk of 16384 elements of a range (grid-stride over the
//                          chunks of every range): each thread sums its strided elements' squares
//                          in float64, the block adds the threads' sums in a fixed tree
//                          (warp shuffles, then the warps' sums in order) -> partial[chunk];
//   range_totals_kernel    one block per range: each thread adds its strided chunks' partials in
//                          chunk order, the block adds the threads' sums in the same fixed tree.
//                          (A thread per range would leave E2B's per-layer embedding, 143,000
//                          chunks, to one thread for milliseconds.)
//
// A range's chunks are numbered consecutively (first_chunk); a block finds its range by binary
// search over first_chunk, so the host uploads one entry per range, not one per chunk.
#include "gpu/ops/cuda/sum_squares.h"

#include <vector>

#include "gpu/core/device_buffer.h"
#include "gpu/core/memory.h"
#include "gpu/ops/cuda/device_math.cuh"
#include "gpu/ops/cuda/launch.h"
#include "gpu/ops/op_check.h"

namespace tandem::gpu::ops::cuda {
namespace {

constexpr int threads = 256;
constexpr std::int64_t chunk = 16384;

struct range_entry {
  std::int64_t offset, count, first_chunk;
};

/// The range holding chunk c: the last one whose first chunk is <= c (empty ranges own no chunk
/// and share their first_chunk with the next range, so the search passes over them).
__device__ int range_of_chunk(const range_entry* ranges, int count, std::int64_t c) {
  int lo = 0, hi = count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (ranges[mid].first_chunk <= c) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/// The sum of every thread's `value` over the block, in a fixed tree: warp shuffles, then the
/// warps' sums in warp order. Valid in thread 0; `warp_sums` is free again on return.
__device__ double block_sum(double value, double* warp_sums) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int o = 16; o > 0; o /= 2) value += __shfl_down_sync(0xffffffffu, value, o);
  if (lane == 0) warp_sums[warp] = value;
  __syncthreads();
  double total = 0;
  if (threadIdx.x == 0)
    for (int w = 0; w < threads / 32; ++w) total += warp_sums[w];
  __syncthreads();  // warp_sums may be rewritten by the next call
  return total;
}

template <class S>
__global__ void __launch_bounds__(threads) chunk_sums_kernel(const S* __restrict__ x, const range_entry* __restrict__ ranges,
                                                             int range_count, std::int64_t chunks, double* __restrict__ partial) {
  __shared__ double warp_sums[threads / 32];
  for (std::int64_t c = blockIdx.x; c < chunks; c += gridDim.x) {
    const range_entry r = ranges[range_of_chunk(ranges, range_count, c)];
    const std::int64_t begin = r.offset + (c - r.first_chunk) * chunk;
    const std::int64_t end = min(begin + chunk, r.offset + r.count);
    double acc = 0;
    for (std::int64_t k = begin + threadIdx.x; k < end; k += threads) {
      const double v = static_cast<double>(to_float(x[k]));
      acc = fma(v, v, acc);
    }
    const double total = block_sum(acc, warp_sums);
    if (threadIdx.x == 0) partial[c] = total;
  }
}

/// One block per range (grid = range count).
__global__ void __launch_bounds__(threads) range_totals_kernel(const range_entry* __restrict__ ranges, int range_count,
                                                               std::int64_t chunks, const double* __restrict__ partial,
                                                               double* __restrict__ sums) {
  __shared__ double warp_sums[threads / 32];
  const int r = static_cast<int>(blockIdx.x);
  const std::int64_t end = r + 1 < range_count ? ranges[r + 1].first_chunk : chunks;
  double acc = 0;
  for (std::int64_t c = ranges[r].first_chunk + threadIdx.x; c < end; c += threads) acc += partial[c];
  const double total = block_sum(acc, warp_sums);
  if (threadIdx.x == 0) sums[r] = total;
}

}  // namespace

status sum_squares(const exec_context& ctx, dtype storage, const tensor& x, std::span<const element_range> ranges,
                   std::span<double> sums) {
  constexpr const char* op = "sum_squares";
  if (ranges.empty()) return status::ok();
  TANDEM_RETURN_IF_ERROR(use_device(ctx));
  std::vector<range_entry> table;
  table.reserve(ranges.size());
  std::int64_t chunks = 0;
  for (const element_range& r : ranges) {
    table.push_back({r.offset, r.count, chunks});
    chunks += (r.count + chunk - 1) / chunk;
  }
  const auto count = static_cast<std::int64_t>(table.size());
  device_buffer on_device, partial, totals;
  const auto table_bytes = count * static_cast<std::int64_t>(sizeof(range_entry));
  TANDEM_RETURN_IF_ERROR(allocate_buffers(ctx, dtype::uint8, {{&on_device, {table_bytes}}}));
  TANDEM_RETURN_IF_ERROR(allocate_buffers(ctx, dtype::float64, {{&partial, {std::max<std::int64_t>(chunks, 1)}}, {&totals, {count}}}));
  TANDEM_RETURN_IF_ERROR(copy_to_device(ctx, on_device.data<void>(), table.data(), table_bytes));
  const auto* entries = on_device.data<const range_entry>();
  const cudaStream_t stream = stream_of(ctx);
  if (chunks > 0) {
    TANDEM_RETURN_IF_ERROR(with_storage(storage, op, [&](auto zero) {
      using S = decltype(zero);
      const unsigned grid = static_cast<unsigned>(std::min<std::int64_t>(chunks, std::int64_t{1} << 20));
      chunk_sums_kernel<S><<<grid, threads, 0, stream>>>(x.as<const S>(), entries, static_cast<int>(count), chunks, partial.data<double>());
      return launch_status(op, "chunk_sums_kernel");
    }));
  }
  range_totals_kernel<<<static_cast<unsigned>(count), threads, 0, stream>>>(entries, static_cast<int>(count), chunks, partial.data<double>(),
                                                                  totals.data<double>());
  TANDEM_RETURN_IF_ERROR(launch_status(op, "range_totals_kernel"));
  return copy_to_host(ctx, sums.data(), totals.data<double>(), count * 8);
}

}  // namespace tandem::gpu::ops::cuda
