// The chunked XXH3's per-chunk hashes on a CUDA device (chunk_hashes.h): a group of eight threads
// a chunk, thread i of the group carrying accumulator i through the chunk's stripes
// (xxh3::lane_hash, the code the host runs lane after lane in its reference).
#include "gpu/core/cuda/chunk_hashes.h"

#include <cuda_runtime.h>

#include "gpu/core/chunked_hash.h"
#include "gpu/core/cuda/check.h"

namespace tandem::gpu::cuda {
namespace {

constexpr int threads = 256;  // 32 chunks a block
constexpr std::uint64_t chunk = chunked_hash_chunk_bytes;

/// A lane's stripes on the device: a stripe one segment holds in ALIGN-byte loads (the pair of
/// words 2k, 2k + 1 that lanes 2k and 2k + 1 both need is one 16-byte load), byte by byte where
/// it spans two segments, and the last 64 bytes (any offset) byte by byte.
template <int ALIGN>
struct device_reader {
  const xxh3::segments& s;
  int lane;
  std::uint32_t seg;
  __device__ __forceinline__ void pair(std::uint64_t v, std::uint64_t& own, std::uint64_t& partner) {
    const unsigned char* p = xxh3::stripe_at(s, seg, v);
    if (p == nullptr) return xxh3::pair_by_bytes(s, seg, v, lane, own, partner);
    const unsigned char* words = p + 16 * (lane >> 1);
    std::uint64_t w0, w1;
    if constexpr (ALIGN == 16) {
      const uint4 q = *reinterpret_cast<const uint4*>(words);
      w0 = static_cast<std::uint64_t>(q.x) | static_cast<std::uint64_t>(q.y) << 32;
      w1 = static_cast<std::uint64_t>(q.z) | static_cast<std::uint64_t>(q.w) << 32;
    } else if constexpr (ALIGN == 8) {
      w0 = *reinterpret_cast<const std::uint64_t*>(words);
      w1 = *reinterpret_cast<const std::uint64_t*>(words + 8);
    } else {
      w0 = xxh3::read_le(words);
      w1 = xxh3::read_le(words + 8);
    }
    own = (lane & 1) ? w1 : w0;
    partner = (lane & 1) ? w0 : w1;
  }
  __device__ __forceinline__ void last_pair(std::uint64_t v, std::uint64_t& own, std::uint64_t& partner) {
    xxh3::pair_by_bytes(s, xxh3::segment_of(s, v), v, lane, own, partner);
  }
};

/// Group g (threads 8g .. 8g + 7 of the grid) hashes chunk g of the stream; its lane 0 writes
/// out[g]. A group's lanes take the same branches and leave together.
template <int ALIGN>
__global__ void __launch_bounds__(threads) chunk_hashes_kernel(xxh3::segments s, std::uint64_t length,
                                                               std::uint64_t chunks, xxh3::keys k, std::uint64_t* out) {
  const std::uint64_t g = (static_cast<std::uint64_t>(blockIdx.x) * threads + threadIdx.x) / 8;
  if (g >= chunks) return;
  const int lane = static_cast<int>(threadIdx.x & 7);
  const std::uint64_t begin = g * chunk;
  const std::uint64_t len = length - begin < chunk ? length - begin : chunk;
  const xxh3::lane_keys key = xxh3::keys_of_lane(k, lane);
  device_reader<ALIGN> read{s, lane, xxh3::segment_of(s, begin)};
  const std::uint64_t acc = xxh3::lane_hash(lane, begin, len, key, read);
  const unsigned mask = 0xFFu << (threadIdx.x & 24);  // this group's lanes of the warp
  std::uint64_t all[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) all[j] = __shfl_sync(mask, acc, j, 8);
  if (lane == 0) out[g] = xxh3::merge(all, k, len);
}

template <int ALIGN>
status launch(const exec_context& ctx, const xxh3::segments& s, std::uint64_t length, std::uint64_t chunks,
              std::uint64_t* out) {
  const std::uint64_t blocks = (chunks * 8 + threads - 1) / threads;
  chunk_hashes_kernel<ALIGN><<<static_cast<unsigned>(blocks), threads, 0, static_cast<cudaStream_t>(ctx.stream.native)>>>(
      s, length, chunks, xxh3::default_keys(), out);
  TANDEM_CUDA_CHECK(cudaGetLastError());  // the launch of chunk_hashes_kernel
  return status::ok();
}

}  // namespace

int stripe_alignment(const xxh3::segments& host_view) {
  int alignment = 16;
  for (std::uint32_t i = 0; i < host_view.count; ++i) {
    if (host_view.start[i] == host_view.start[i + 1]) continue;  // an empty segment is never read
    const std::uint64_t at = reinterpret_cast<std::uintptr_t>(host_view.base[i]) - host_view.start[i];
    while (alignment > 1 && at % static_cast<std::uint64_t>(alignment) != 0) alignment /= 2;
  }
  return alignment >= 16 ? 16 : alignment >= 8 ? 8 : 1;
}

status enqueue_chunk_hashes(const exec_context& ctx, const xxh3::segments& device_view, std::uint64_t length,
                            std::uint64_t chunks, int alignment, std::uint64_t* out) {
  if (chunks == 0) return status::ok();
  int current = -1;
  TANDEM_CUDA_CHECK(cudaGetDevice(&current));
  if (current != ctx.dev.index) TANDEM_CUDA_CHECK(cudaSetDevice(ctx.dev.index));
  if (alignment == 16) return launch<16>(ctx, device_view, length, chunks, out);
  if (alignment == 8) return launch<8>(ctx, device_view, length, chunks, out);
  return launch<1>(ctx, device_view, length, chunks, out);
}

}  // namespace tandem::gpu::cuda
