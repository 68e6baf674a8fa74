// chunked_xxh3_on (gpu/core/device_hash.h) on cuda:0: the host's chunked XXH3 of the same bytes
// for lengths that take every path (none, a short last chunk hashed on the host, a last chunk
// just long enough for the kernel, whole chunks, a stripe's and a block's part), at addresses
// aligned to 16, 8 and 1 bytes (the kernel's three loads), and a one-bit change in any chunk
// changing it.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "support/cuda_context.h"
#include "gpu/core/chunked_hash.h"
#include "gpu/core/device_hash.h"
#include "gpu/core/memory.h"

using namespace tandem::gpu;

namespace {

constexpr std::size_t C = chunked_hash_chunk_bytes;

/// `bytes` random bytes on the host and a copy on cuda:0 (16 bytes of room before them).
struct bytes_on_both {
  std::vector<std::byte> host;
  std::byte* device = nullptr;
  explicit bytes_on_both(std::size_t n, std::uint32_t seed) : host(n) {
    std::mt19937 rng(seed);
    for (auto& x : host) x = static_cast<std::byte>(rng());
    auto p = device_allocate(device::cuda(0), static_cast<std::int64_t>(n + 16));
    BOOST_REQUIRE(p.has_value());
    device = static_cast<std::byte*>(*p);
  }
  ~bytes_on_both() { device_free(device::cuda(0), device); }
  /// The host bytes copied to the device at `offset` (0..16) from its allocation.
  std::byte* at(std::size_t offset) {
    BOOST_REQUIRE(copy_to_device(device::cuda(0), device + offset, host.data(), static_cast<std::int64_t>(host.size())).is_ok());
    return device + offset;
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(cuda_chunk_hashes)

BOOST_AUTO_TEST_CASE(the_device_gives_the_hosts_chunked_hash_at_every_length_and_alignment) {
  const exec_context ctx = tandem::test::cuda::test_context();
  bytes_on_both b(3 * C + 5000, 7);
  const std::vector<std::size_t> lengths = {0, 1, 240, 241, 1024, 1025, 4096 + 63, C - 1, C, C + 1, C + 240, C + 241,
                                            2 * C + 12345, 3 * C + 5000};
  for (const std::size_t offset : {std::size_t{0}, std::size_t{8}, std::size_t{3}}) {
    const std::byte* d = b.at(offset);
    for (const std::size_t n : lengths) {
      auto h = chunked_xxh3_on(ctx, d, static_cast<std::int64_t>(n));
      BOOST_REQUIRE_MESSAGE(h.has_value(), "length " << n << ": " << (h.has_value() ? "" : h.error().message()));
      BOOST_TEST(*h == chunked_xxh3({b.host.data(), n}), "length " << n << " at offset " << offset);
    }
  }
}

BOOST_AUTO_TEST_CASE(ranges_on_the_device_hash_as_their_concatenation_on_the_host) {
  // Ranges that end inside stripes (odd sizes, empty ones) and ranges of whole stripes, as a
  // model's tensors are, at 16-byte-aligned and odd addresses.
  const exec_context ctx = tandem::test::cuda::test_context();
  bytes_on_both b(2 * C + 99999, 10);
  std::mt19937 rng(11);
  for (const std::size_t offset : {std::size_t{0}, std::size_t{5}}) {
    std::byte* d = b.at(offset);
    for (const std::size_t grain : {std::size_t{1}, std::size_t{64}}) {
      std::vector<byte_range> ranges;
      for (std::size_t at = 0; at < b.host.size();) {
        const std::size_t n = std::min(b.host.size() - at, grain * std::uniform_int_distribution<std::size_t>(0, 5000)(rng));
        ranges.push_back({d + at, static_cast<std::int64_t>(n)});
        at += n;
      }
      auto h = chunked_xxh3_on(ctx, ranges);
      BOOST_REQUIRE_MESSAGE(h.has_value(), (h.has_value() ? "" : h.error().message()));
      BOOST_TEST(*h == chunked_xxh3(b.host), ranges.size() << " ranges of a multiple of " << grain << " bytes at offset " << offset);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_one_bit_change_in_any_chunk_changes_the_devices_hash) {
  const exec_context ctx = tandem::test::cuda::test_context();
  bytes_on_both b(2 * C + 777, 8);
  const std::int64_t n = static_cast<std::int64_t>(b.host.size());
  auto before = chunked_xxh3_on(ctx, b.at(0), n);
  BOOST_REQUIRE(before.has_value());
  for (const std::size_t at : {std::size_t{0}, C - 1, C + 4096, 2 * C + 776}) {
    b.host[at] ^= std::byte{1};
    auto after = chunked_xxh3_on(ctx, b.at(0), n);
    BOOST_REQUIRE(after.has_value());
    BOOST_TEST(*after != *before, "byte " << at);
    BOOST_TEST(*after == chunked_xxh3(b.host), "byte " << at);
    b.host[at] ^= std::byte{1};
  }
}

BOOST_AUTO_TEST_SUITE_END()
