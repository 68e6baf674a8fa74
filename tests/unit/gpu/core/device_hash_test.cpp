// chunked_xxh3_on (gpu/core/device_hash.h) on the CPU: the host's chunked XXH3 of the same bytes,
// and a clear error for a negative length or missing bytes. tests/gpu/core holds it to the same
// values on a CUDA device.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "gpu/core/chunked_hash.h"
#include "gpu/core/device_hash.h"

using namespace tandem::gpu;

BOOST_AUTO_TEST_SUITE(device_hash_test)

BOOST_AUTO_TEST_CASE(on_the_cpu_it_is_the_chunked_hash_of_the_same_bytes) {
  std::mt19937 rng(5);
  std::vector<std::byte> b(3 * chunked_hash_chunk_bytes + 100);
  for (auto& x : b) x = static_cast<std::byte>(rng());
  for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{240}, std::size_t{241}, b.size()}) {
    auto h = chunked_xxh3_on(exec_context::cpu(), b.data(), static_cast<std::int64_t>(n));
    BOOST_REQUIRE(h.has_value());
    BOOST_TEST(*h == chunked_xxh3({b.data(), n}), "length " << n);
  }
}

BOOST_AUTO_TEST_CASE(on_the_cpu_ranges_hash_as_their_concatenation) {
  std::mt19937 rng(9);
  std::vector<std::byte> all(2 * chunked_hash_chunk_bytes + 999);
  for (auto& x : all) x = static_cast<std::byte>(rng());
  std::vector<byte_range> ranges;
  for (std::size_t at = 0; at < all.size();) {
    const std::size_t n = std::min(all.size() - at, std::uniform_int_distribution<std::size_t>(0, 300000)(rng));
    ranges.push_back({all.data() + at, static_cast<std::int64_t>(n)});
    at += n;
  }
  auto h = chunked_xxh3_on(exec_context::cpu(), ranges);
  BOOST_REQUIRE(h.has_value());
  BOOST_TEST(*h == chunked_xxh3(all));
  auto none = chunked_xxh3_on(exec_context::cpu(), std::span<const byte_range>{});
  BOOST_REQUIRE(none.has_value());
  BOOST_TEST(*none == chunked_xxh3({}));
}

BOOST_AUTO_TEST_CASE(the_chunk_hashes_and_the_length_give_the_chunked_hash) {
  std::vector<std::byte> b(2 * chunked_hash_chunk_bytes + 7, std::byte{3});
  const std::span<const std::byte> all(b);
  const std::vector<std::uint64_t> h = {chunk_hash(all.subspan(0, chunked_hash_chunk_bytes)),
                                        chunk_hash(all.subspan(chunked_hash_chunk_bytes, chunked_hash_chunk_bytes)),
                                        chunk_hash(all.subspan(2 * chunked_hash_chunk_bytes))};
  BOOST_TEST(chunked_xxh3_of_chunks(h, b.size()) == chunked_xxh3(all));
  BOOST_TEST(chunked_xxh3_of_chunks({}, 0) == chunked_xxh3({}));
}

BOOST_AUTO_TEST_CASE(a_negative_length_or_missing_bytes_is_refused_by_name) {
  const std::byte one{1};
  auto negative = chunked_xxh3_on(exec_context::cpu(), &one, -1);
  BOOST_REQUIRE(!negative.has_value());
  BOOST_TEST((negative.error().code() == status_code::invalid_argument));
  BOOST_TEST(negative.error().message() == "chunked_xxh3_on: range 0 of 1: -1 bytes at an address");
  const std::vector<byte_range> ranges = {{&one, 1}, {nullptr, 0}, {nullptr, 8}};
  auto missing = chunked_xxh3_on(exec_context::cpu(), ranges);
  BOOST_REQUIRE(!missing.has_value());
  BOOST_TEST(missing.error().message() == "chunked_xxh3_on: range 2 of 3: 8 bytes at a null pointer");
}

BOOST_AUTO_TEST_SUITE_END()
