// The chunked XXH3-64 (gpu/core/chunked_hash.h): XXH3 itself through the library, the definition
// checked on hand-built chunk arrays, known answers for a later GPU port, and the stream agreeing
// with the one-shot form however its input is split.
#include <boost/test/unit_test.hpp>

#include <xxhash.h>

#include <cstdint>
#include <random>
#include <string_view>
#include <vector>

#include "gpu/core/chunked_hash.h"

using namespace tandem::gpu;

namespace {

constexpr std::size_t C = chunked_hash_chunk_bytes;

/// n bytes of a fixed pattern that differs from chunk to chunk: byte i is the top byte of
/// (i + 1) * 0x9E3779B97F4A7C15 mod 2^64.
std::vector<std::byte> pattern(std::size_t n) {
  std::vector<std::byte> b(n);
  for (std::size_t i = 0; i < n; ++i)
    b[i] = static_cast<std::byte>((static_cast<std::uint64_t>(i + 1) * 0x9E3779B97F4A7C15ull) >> 56);
  return b;
}

/// The bytes of a string literal (static storage: the span stays valid).
std::span<const std::byte> text(std::string_view s) { return std::as_bytes(std::span<const char>(s.data(), s.size())); }

/// XXH3_64bits of one piece of `b`, straight from the library.
std::uint64_t xxh3(std::span<const std::byte> b, std::size_t begin, std::size_t size) {
  return XXH3_64bits(b.data() + begin, size);
}

/// XXH3_64bits of `words` written out byte by byte as little-endian uint64s: the definition's A.
std::uint64_t xxh3_of_array(const std::vector<std::uint64_t>& words) {
  std::vector<unsigned char> a;
  for (const std::uint64_t w : words)
    for (int k = 0; k < 8; ++k) a.push_back(static_cast<unsigned char>(w >> (8 * k)));
  return XXH3_64bits(a.data(), a.size());
}

/// chunked_xxh3 of `b` fed to a stream in pieces of the given sizes (the rest, if any, last).
std::uint64_t streamed(std::span<const std::byte> b, const std::vector<std::size_t>& sizes) {
  chunked_xxh3_stream h;
  std::size_t at = 0;
  for (const std::size_t n : sizes) {
    BOOST_REQUIRE(n <= b.size() - at);
    h.update(b.subspan(at, n));
    at += n;
  }
  h.update(b.subspan(at));
  return h.digest();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(chunked_hash_test)

BOOST_AUTO_TEST_CASE(xxh3_64_of_the_library_gives_the_published_reference_values) {
  BOOST_TEST(XXH3_64bits("", 0) == 0x2D06800538D394C2ull);
  BOOST_TEST(XXH3_64bits("a", 1) == 0xE6C632B61E964E1Full);
}

BOOST_AUTO_TEST_CASE(the_chunk_size_is_one_mebibyte) { BOOST_TEST(C == 1048576u); }

BOOST_AUTO_TEST_CASE(the_empty_input_hashes_the_array_holding_only_the_length_zero) {
  BOOST_TEST(chunked_xxh3({}) == xxh3_of_array({0}));
  const unsigned char zeros[8] = {};
  BOOST_TEST(chunked_xxh3({}) == XXH3_64bits(zeros, 8));
}

BOOST_AUTO_TEST_CASE(a_short_input_is_one_chunk_followed_by_its_length) {
  const auto b = text("weights of version 3");
  BOOST_TEST(chunked_xxh3(b) == xxh3_of_array({xxh3(b, 0, b.size()), b.size()}));
}

BOOST_AUTO_TEST_CASE(an_input_of_exactly_one_chunk_hashes_that_chunks_hash_and_its_length) {
  const auto b = pattern(C);
  BOOST_TEST(chunked_xxh3(b) == xxh3_of_array({xxh3(b, 0, C), C}));
}

BOOST_AUTO_TEST_CASE(one_chunk_and_one_byte_make_a_second_chunk_one_byte_long) {
  const auto b = pattern(C + 1);
  BOOST_TEST(chunked_xxh3(b) == xxh3_of_array({xxh3(b, 0, C), xxh3(b, C, 1), C + 1}));
}

BOOST_AUTO_TEST_CASE(several_chunks_with_a_shorter_last_one_hash_their_chunk_hashes_in_order_then_the_length) {
  const std::size_t n = 3 * C + 5;
  const auto b = pattern(n);
  BOOST_TEST(chunked_xxh3(b) == xxh3_of_array({xxh3(b, 0, C), xxh3(b, C, C), xxh3(b, 2 * C, C), xxh3(b, 3 * C, 5), n}));
  // Order matters: the same chunk hashes swapped give another value.
  BOOST_TEST(chunked_xxh3(b) != xxh3_of_array({xxh3(b, C, C), xxh3(b, 0, C), xxh3(b, 2 * C, C), xxh3(b, 3 * C, 5), n}));
}

BOOST_AUTO_TEST_CASE(a_one_byte_change_in_the_first_a_middle_or_the_last_chunk_changes_the_result) {
  const auto base = pattern(3 * C + 17);
  const std::uint64_t h = chunked_xxh3(base);
  std::vector<std::uint64_t> seen{h};
  for (const std::size_t at : {std::size_t{0}, C + C / 2, base.size() - 1}) {
    auto b = base;
    b[at] ^= std::byte{0x01};
    const std::uint64_t changed = chunked_xxh3(b);
    BOOST_TEST(changed != h, "byte " << at);
    for (const std::uint64_t other : seen) BOOST_TEST(changed != other, "byte " << at);
    seen.push_back(changed);
  }
}

BOOST_AUTO_TEST_CASE(the_length_closes_the_array_so_trailing_zero_bytes_change_the_result) {
  const std::vector<std::byte> zeros(C + 1, std::byte{0});
  const std::span<const std::byte> z(zeros);
  BOOST_TEST(chunked_xxh3({}) != chunked_xxh3(z.first(1)));
  BOOST_TEST(chunked_xxh3(z.first(C - 1)) != chunked_xxh3(z.first(C)));
  BOOST_TEST(chunked_xxh3(z.first(C)) != chunked_xxh3(z.first(C + 1)));
}

BOOST_AUTO_TEST_CASE(known_answers_pin_the_definition_for_other_implementations) {
  // Computed by a separate C program from the definition with libxxhash 0.8.1; a GPU kernel must
  // give the same values.
  BOOST_TEST(chunked_xxh3({}) == 0xc77b3abb6f87acd9ull);
  BOOST_TEST(chunked_xxh3(text("a")) == 0x6186221013e2d116ull);
  BOOST_TEST(chunked_xxh3(text("weights of version 3")) == 0xf14bbd5699c5155cull);
  BOOST_TEST(chunked_xxh3(pattern(C)) == 0x0d622e9dff32c358ull);
  BOOST_TEST(chunked_xxh3(pattern(C + 1)) == 0x316c7784ee6bee89ull);
}

BOOST_AUTO_TEST_CASE(a_fresh_stream_digests_like_the_empty_input) {
  chunked_xxh3_stream h;
  BOOST_TEST(h.digest() == chunked_xxh3({}));
  h.update({});
  BOOST_TEST(h.digest() == chunked_xxh3({}));
}

BOOST_AUTO_TEST_CASE(a_stream_gives_the_one_shot_result_however_its_input_is_split) {
  const auto b = pattern(3 * C + 5);
  const std::uint64_t whole = chunked_xxh3(b);
  BOOST_TEST(streamed(b, {}) == whole);
  BOOST_TEST(streamed(b, {C, C, C}) == whole, "at the chunk boundaries");
  BOOST_TEST(streamed(b, {1, C, C, 1}) == whole, "chunk-sized pieces starting one byte into a chunk");
  BOOST_TEST(streamed(b, {C - 1, 2, C - 1, 0, 0, C}) == whole, "pieces ending on either side of a boundary");
  BOOST_TEST(streamed(b, {2 * C + 3}) == whole, "a piece longer than two chunks, then the rest");
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 8; ++trial) {
    std::vector<std::size_t> sizes;
    std::size_t left = b.size();
    while (left > 0) {
      const std::size_t n = std::min<std::size_t>(left, rng() % (trial < 4 ? 4096 : 3 * C / 2));  // 0 sometimes
      sizes.push_back(n);
      left -= n;
    }
    BOOST_TEST(streamed(b, sizes) == whole, "random split " << trial << " into " << sizes.size() << " pieces");
  }
}

BOOST_AUTO_TEST_CASE(a_short_input_streamed_byte_by_byte_gives_the_one_shot_result) {
  const auto b = pattern(300);
  BOOST_TEST(streamed(b, std::vector<std::size_t>(300, 1)) == chunked_xxh3(b));
}

BOOST_AUTO_TEST_CASE(a_digest_midway_is_the_hash_of_the_prefix_and_the_stream_goes_on) {
  const auto b = pattern(2 * C + 9);
  const std::span<const std::byte> s(b);
  chunked_xxh3_stream h;
  h.update(s.first(C + 4));
  BOOST_TEST(h.digest() == chunked_xxh3(s.first(C + 4)));
  BOOST_TEST(h.digest() == chunked_xxh3(s.first(C + 4)), "digest() leaves the stream as it was");
  chunked_xxh3_stream moved = std::move(h);
  moved.update(s.subspan(C + 4));
  BOOST_TEST(moved.digest() == chunked_xxh3(s));
}

BOOST_AUTO_TEST_SUITE_END()
