// The chunked XXH3 of bytes on their own device (device_hash.h).
#include "gpu/core/device_hash.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <vector>

#include "gpu/core/chunked_hash.h"
#include "gpu/core/memory.h"
#include "gpu/core/xxh3_lanes.h"
#if TANDEM_HAVE_CUDA
#include "gpu/core/cuda/chunk_hashes.h"
#endif

namespace tandem::gpu {
namespace {

constexpr std::uint64_t chunk = chunked_hash_chunk_bytes;

#if TANDEM_HAVE_CUDA
/// The stream bytes [from, from + n) of the ranges (starts: each range's stream offset, then the
/// total) copied to host memory at `out`.
status copy_stream_to_host(const exec_context& ctx, std::span<const byte_range> ranges, const std::vector<std::uint64_t>& starts,
                           std::uint64_t from, std::uint64_t n, std::byte* out) {
  for (std::size_t i = 0; i < ranges.size() && n > 0; ++i) {
    if (starts[i + 1] <= from) continue;
    const std::uint64_t take = std::min(n, starts[i + 1] - from);
    if (status s = copy_to_host(ctx, out, ranges[i].data + (from - starts[i]), static_cast<std::int64_t>(take)); !s) return s;
    out += take;
    from += take;
    n -= take;
  }
  return status::ok();
}

/// The chunk hashes of the long chunks on the device: a table of the ranges (bases, then starts)
/// and the hashes in one device allocation, the kernel, the hashes read back.
status device_chunk_hashes(const exec_context& ctx, std::span<const byte_range> ranges, const std::vector<std::uint64_t>& starts,
                           std::uint64_t long_chunks, std::uint64_t* hashes) {
  const std::size_t n = ranges.size();
  std::vector<std::uint64_t> table(n + (n + 1));  // U64 [n] bases, U64 [n + 1] starts; the device's copy then U64 [chunks]
  std::vector<const unsigned char*> bases(n);
  for (std::size_t i = 0; i < n; ++i) {
    bases[i] = reinterpret_cast<const unsigned char*>(ranges[i].data);
    table[i] = reinterpret_cast<std::uintptr_t>(ranges[i].data);
  }
  std::copy(starts.begin(), starts.end(), table.begin() + static_cast<std::ptrdiff_t>(n));
  const auto bytes = static_cast<std::int64_t>((table.size() + long_chunks) * sizeof(std::uint64_t));
  auto on_device = device_allocate(ctx.dev, bytes);
  if (!on_device) return status{on_device.error().code(), "a table of " + std::to_string(n) + " ranges and " +
                                                              std::to_string(long_chunks) + " chunk hashes: " +
                                                              on_device.error().message()};
  auto* words = static_cast<std::uint64_t*>(*on_device);
  const xxh3::segments host_view{bases.data(), starts.data(), static_cast<std::uint32_t>(n)};
  const xxh3::segments device_view{reinterpret_cast<const unsigned char* const*>(words), words + n, static_cast<std::uint32_t>(n)};
  std::uint64_t* out = words + n + (n + 1);
  status s = copy_to_device(ctx, words, table.data(), static_cast<std::int64_t>(table.size() * sizeof(std::uint64_t)));
  if (s) s = cuda::enqueue_chunk_hashes(ctx, device_view, starts[n], long_chunks, cuda::stripe_alignment(host_view), out);
  if (s) s = copy_to_host(ctx, hashes, out, static_cast<std::int64_t>(long_chunks * sizeof(std::uint64_t)));
  device_free(ctx.dev, words);
  return s;
}
#endif

}  // namespace

result<std::uint64_t> chunked_xxh3_on(const exec_context& ctx, std::span<const byte_range> ranges) {
  std::vector<std::uint64_t> starts(1, 0);  // each range's stream offset, then the total
  starts.reserve(ranges.size() + 1);
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    const byte_range& r = ranges[i];
    if (r.bytes < 0 || (r.bytes > 0 && r.data == nullptr))
      return status{status_code::invalid_argument, "chunked_xxh3_on: range " + std::to_string(i) + " of " +
                                                       std::to_string(ranges.size()) + ": " + std::to_string(r.bytes) +
                                                       " bytes at " + (r.data ? "an address" : "a null pointer")};
    starts.push_back(starts.back() + static_cast<std::uint64_t>(r.bytes));
  }
  const std::uint64_t length = starts.back();
  if (ctx.dev.is_cpu()) {
    chunked_xxh3_stream h;
    for (const byte_range& r : ranges) h.update({r.data, static_cast<std::size_t>(r.bytes)});
    return h.digest();
  }
#if TANDEM_HAVE_CUDA
  const std::uint64_t chunks = (length + chunk - 1) / chunk;
  const std::uint64_t last = chunks == 0 ? 0 : length - (chunks - 1) * chunk;
  const std::uint64_t long_chunks = last > xxh3::midsize_max ? chunks : chunks - (chunks > 0);
  std::vector<std::uint64_t> hashes(chunks);
  if (long_chunks > 0)
    if (status s = device_chunk_hashes(ctx, ranges, starts, long_chunks, hashes.data()); !s)
      return status{s.code(), "chunked_xxh3_on: " + s.message()};
  if (long_chunks < chunks) {  // a last chunk of at most 240 bytes: XXH3's short paths, on the host
    std::array<std::byte, xxh3::midsize_max> tail{};
    if (status s = copy_stream_to_host(ctx, ranges, starts, (chunks - 1) * chunk, last, tail.data()); !s)
      return status{s.code(), "chunked_xxh3_on: the last chunk: " + s.message()};
    hashes[chunks - 1] = chunk_hash({tail.data(), static_cast<std::size_t>(last)});
  }
  return chunked_xxh3_of_chunks(hashes, length);
#else
  return status{status_code::unsupported, "chunked_xxh3_on: " + ctx.dev.to_string() + ": this build has no CUDA"};
#endif
}

result<std::uint64_t> chunked_xxh3_on(const exec_context& ctx, const std::byte* data, std::int64_t bytes) {
  const byte_range one{data, bytes};
  return chunked_xxh3_on(ctx, std::span(&one, 1));
}

}  // namespace tandem::gpu
