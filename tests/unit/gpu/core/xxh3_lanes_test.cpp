// XXH3-64's long path lane by lane (gpu/core/xxh3_lanes.h), the code a GPU runs a thread per
// accumulator, held on the host to libxxhash's XXH3_64bits at every length past 240 bytes where the
// layout changes: the first long lengths, each count of a block's last stripes, whole blocks and
// one byte either side, a whole chunk, and random lengths and contents.
#include <boost/test/unit_test.hpp>

#include <xxhash.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "gpu/core/xxh3_lanes.h"

namespace xxh3 = tandem::gpu::xxh3;

namespace {

std::vector<unsigned char> random_bytes(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<unsigned char> b(n);
  for (auto& x : b) x = static_cast<unsigned char>(rng());
  return b;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(xxh3_lanes_test)

BOOST_AUTO_TEST_CASE(every_length_from_241_to_four_blocks_and_a_stripe_hashes_as_the_library_does) {
  const auto b = random_bytes(4 * xxh3::block_bytes + 200, 1);
  const xxh3::keys k = xxh3::default_keys();
  std::size_t differ = 0;
  for (std::size_t n = xxh3::midsize_max + 1; n <= b.size(); ++n)
    if (xxh3::hash_long(b.data(), n, k) != XXH3_64bits(b.data(), n) && ++differ <= 5)
      BOOST_ERROR("length " << n << ": the lanes give another hash than XXH3_64bits");
  BOOST_TEST(differ == 0u);
}

BOOST_AUTO_TEST_CASE(a_whole_chunk_and_lengths_around_it_hash_as_the_library_does) {
  const std::size_t chunk = std::size_t{1} << 20;
  const auto b = random_bytes(chunk + 64, 2);
  const xxh3::keys k = xxh3::default_keys();
  for (const std::size_t n : {chunk - 1025, chunk - 1024, chunk - 1023, chunk - 65, chunk - 64, chunk - 1, chunk, chunk + 1,
                              chunk + 63, chunk + 64})
    BOOST_TEST(xxh3::hash_long(b.data(), n, k) == XXH3_64bits(b.data(), n), "length " << n);
}

BOOST_AUTO_TEST_CASE(random_lengths_and_contents_hash_as_the_library_does) {
  std::mt19937 rng(3);
  const xxh3::keys k = xxh3::default_keys();
  for (int i = 0; i < 64; ++i) {
    const std::size_t n = std::uniform_int_distribution<std::size_t>(xxh3::midsize_max + 1, std::size_t{1} << 20)(rng);
    const auto b = random_bytes(n, 100 + static_cast<std::uint32_t>(i));
    BOOST_TEST(xxh3::hash_long(b.data(), n, k) == XXH3_64bits(b.data(), n), "length " << n);
  }
}

BOOST_AUTO_TEST_CASE(a_stream_in_ranges_of_any_size_hashes_chunk_by_chunk_as_its_concatenation_does) {
  // Ranges whose sizes put stripes across their ends (odd sizes, a stripe's part, empty ones),
  // and others a whole number of stripes, as a model's tensors are.
  std::mt19937 rng(6);
  for (int layout = 0; layout < 4; ++layout) {
    std::vector<std::vector<unsigned char>> pieces;
    std::vector<unsigned char> all;
    while (all.size() < (std::size_t{5} << 19)) {  // 2.5 MiB: two whole chunks and a part
      const std::size_t n = layout == 0   ? std::uniform_int_distribution<std::size_t>(0, 300)(rng)
                            : layout == 1 ? 64 * std::uniform_int_distribution<std::size_t>(1, 4000)(rng)
                            : layout == 2 ? std::uniform_int_distribution<std::size_t>(0, 70000)(rng)
                                          : std::size_t{1} << 19;
      pieces.push_back(random_bytes(n, static_cast<std::uint32_t>(rng())));
      all.insert(all.end(), pieces.back().begin(), pieces.back().end());
    }
    std::vector<const unsigned char*> base;
    std::vector<std::uint64_t> start(1, 0);
    for (const auto& p : pieces) {
      base.push_back(p.data());
      start.push_back(start.back() + p.size());
    }
    const xxh3::segments s{base.data(), start.data(), static_cast<std::uint32_t>(pieces.size())};
    const xxh3::keys k = xxh3::default_keys();
    const std::size_t chunk = std::size_t{1} << 20;
    for (std::size_t begin = 0; begin < all.size(); begin += chunk) {
      const std::size_t n = std::min(chunk, all.size() - begin);
      BOOST_TEST(xxh3::hash_long(s, begin, n, k) == XXH3_64bits(all.data() + begin, n),
                 "layout " << layout << ", " << pieces.size() << " ranges, the chunk at " << begin);
    }
  }
}

BOOST_AUTO_TEST_CASE(the_segment_of_a_byte_skips_empty_ranges) {
  const unsigned char a[4] = {}, c[4] = {};
  const unsigned char* base[4] = {a, nullptr, c, nullptr};
  const std::uint64_t start[5] = {0, 4, 4, 8, 8};
  const xxh3::segments s{base, start, 4};
  BOOST_TEST(xxh3::segment_of(s, 0) == 0u);
  BOOST_TEST(xxh3::segment_of(s, 3) == 0u);
  BOOST_TEST(xxh3::segment_of(s, 4) == 2u);
  BOOST_TEST(xxh3::segment_of(s, 7) == 2u);
  std::uint32_t seg = 0;
  BOOST_TEST(xxh3::address_of(s, seg, 5) == c + 1);
  BOOST_TEST(seg == 2u);
}

BOOST_AUTO_TEST_CASE(the_keys_are_the_default_secret_read_as_little_endian_words) {
  const xxh3::keys k = xxh3::default_keys();
  BOOST_TEST(k.stripe[0] == 0xbe4ba423396cfeb8ull);  // secret bytes 0..7: b8 fe 6c 39 23 a4 4b be
  BOOST_TEST(k.stripe[23] == 0x7e404bbbcafbd7afull);  // bytes 184..191: af d7 fb ca bb 4b 40 7e
  BOOST_TEST(k.merge[0] == 0x6dd4de1cad21f72cull);  // bytes 11..18: 2c f7 21 ad 1c de d4 6d
}

BOOST_AUTO_TEST_CASE(a_one_bit_change_anywhere_in_a_stripe_changes_the_hash) {
  auto b = random_bytes(3000, 4);
  const xxh3::keys k = xxh3::default_keys();
  const std::uint64_t before = xxh3::hash_long(b.data(), b.size(), k);
  for (const std::size_t at : {std::size_t{0}, std::size_t{7}, std::size_t{8}, std::size_t{1023}, std::size_t{2999}}) {
    b[at] ^= 1;
    BOOST_TEST(xxh3::hash_long(b.data(), b.size(), k) != before, "byte " << at);
    b[at] ^= 1;
  }
}

BOOST_AUTO_TEST_SUITE_END()
