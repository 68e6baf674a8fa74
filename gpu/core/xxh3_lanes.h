// XXH3-64 (seed 0, the default secret) of inputs longer than 240 bytes, written lane by lane so a
// GPU can give each of the hash's eight accumulators a thread: the per-chunk hash of the chunked
// XXH3 (chunked_hash.h) computed where the bytes are, on the device. The same functions compile
// for the host, where a test holds them to libxxhash's XXH3_64bits at every length class; inputs of
// at most 240 bytes take XXH3's short paths, which this header does not have (the caller hashes
// them on the host with the library).
//
// The long path, as xxHash's published XXH3 specification defines it:
//
//   acc[0..7]   = PRIME32_3, PRIME64_1, PRIME64_2, PRIME64_3, PRIME64_4, PRIME32_2, PRIME64_5, PRIME32_1
//   a stripe    = 64 bytes, 8 little-endian words d[0..7]; with key words k[0..7]:
//                 acc[i] += d[i ^ 1] + lo32(d[i] ^ k[i]) * hi32(d[i] ^ k[i])
//   a block     = 16 stripes, stripe s keyed by secret words s .. s + 7 (byte offset 8 s); after
//                 each whole block every acc[i] is scrambled with secret word 16 + i:
//                 acc ^= acc >> 47; acc ^= key; acc *= PRIME32_1
//   blocks      = (L - 1) / 1024 whole blocks, then ((L - 1) mod 1024) / 64 stripes of the last,
//                 unscrambled, then the input's last 64 bytes as one stripe keyed at byte 121
//   result      = avalanche(L * PRIME64_1 + sum over j < 4 of fold(acc[2j] ^ m[2j], acc[2j+1] ^ m[2j+1]))
//                 with m the secret's words at byte 11, fold(a, b) the 128-bit product's halves
//                 xored, avalanche(h): h ^= h >> 37; h *= 0x165667919E3779F9; h ^= h >> 32
//
// Lane i of a stripe needs its own word and its partner's (i ^ 1): the pair (2k, 2k + 1) is one
// 16-byte load that both lanes make.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define TANDEM_XXH3_HD __host__ __device__ __forceinline__
#define TANDEM_XXH3_UNROLL _Pragma("unroll")
#else
#define TANDEM_XXH3_HD inline
#define TANDEM_XXH3_UNROLL
#endif

namespace tandem::gpu::xxh3 {

/// Inputs of more than this many bytes take the long path.
inline constexpr std::size_t midsize_max = 240;
inline constexpr std::size_t stripe_bytes = 64;
inline constexpr std::size_t stripes_per_block = 16;
inline constexpr std::size_t block_bytes = stripe_bytes * stripes_per_block;

inline constexpr std::uint64_t prime32_1 = 0x9E3779B1u;
inline constexpr std::uint64_t prime64_1 = 0x9E3779B185EBCA87ull;

/// The default secret's words the long path reads, as little-endian uint64s: by value into a
/// kernel's parameters, so every thread reads them from the constant bank.
struct keys {
  std::uint64_t stripe[24];  ///< word w = bytes 8w .. 8w + 7 (stripes: s + i; scrambles: 16 + i)
  std::uint64_t last[8];     ///< bytes 121 + 8i: the last stripe's keys
  std::uint64_t merge[8];    ///< bytes 11 + 8i: the merge's
};

/// The keys of XXH3's default 192-byte secret.
keys default_keys();

/// Accumulator i's starting value.
TANDEM_XXH3_HD std::uint64_t lane_init(int i) {
  constexpr std::uint64_t init[8] = {0xC2B2AE3Dull,         0x9E3779B185EBCA87ull, 0xC2B2AE3D27D4EB4Full,
                                     0x165667B19E3779F9ull, 0x85EBCA77C2B2AE63ull, 0x85EBCA77ull,
                                     0x27D4EB2F165667C5ull, 0x9E3779B1ull};
  return init[i];
}

/// Lane i's step over one stripe: its own word d[i], its partner's d[i ^ 1], its key k[i].
TANDEM_XXH3_HD std::uint64_t lane_accumulate(std::uint64_t acc, std::uint64_t own, std::uint64_t partner,
                                             std::uint64_t key) {
  const std::uint64_t mixed = own ^ key;
  return acc + partner + (mixed & 0xFFFFFFFFull) * (mixed >> 32);
}

/// Lane i's scramble after a whole block, with secret word 16 + i.
TANDEM_XXH3_HD std::uint64_t lane_scramble(std::uint64_t acc, std::uint64_t key) {
  acc ^= acc >> 47;
  acc ^= key;
  return acc * prime32_1;
}

/// The low and high halves of a * b (128 bits), xored.
TANDEM_XXH3_HD std::uint64_t fold_product(std::uint64_t a, std::uint64_t b) {
#if defined(__CUDA_ARCH__)
  return (a * b) ^ __umul64hi(a, b);
#else
  const std::uint64_t lo_lo = (a & 0xFFFFFFFFull) * (b & 0xFFFFFFFFull), hi_lo = (a >> 32) * (b & 0xFFFFFFFFull);
  const std::uint64_t lo_hi = (a & 0xFFFFFFFFull) * (b >> 32), hi_hi = (a >> 32) * (b >> 32);
  const std::uint64_t cross = (lo_lo >> 32) + (hi_lo & 0xFFFFFFFFull) + lo_hi;
  const std::uint64_t high = (hi_lo >> 32) + (cross >> 32) + hi_hi;
  return ((cross << 32) | (lo_lo & 0xFFFFFFFFull)) ^ high;
#endif
}

/// The hash of an input of `length` (> 240) bytes from its eight accumulators.
TANDEM_XXH3_HD std::uint64_t merge(const std::uint64_t (&acc)[8], const keys& k, std::uint64_t length) {
  std::uint64_t h = length * prime64_1;
  for (int j = 0; j < 4; ++j) h += fold_product(acc[2 * j] ^ k.merge[2 * j], acc[2 * j + 1] ^ k.merge[2 * j + 1]);
  h ^= h >> 37;
  h *= 0x165667919E3779F9ull;
  return h ^ (h >> 32);
}

/// Where the long path's stripes of an input of `length` (> 240) bytes are.
struct layout {
  std::uint64_t whole_blocks;  ///< scrambled after their 16 stripes
  std::uint64_t tail_stripes;  ///< of the block after them, not scrambled
  /// The last stripe starts at length - 64 (any byte offset).
};
TANDEM_XXH3_HD layout layout_of(std::uint64_t length) {
  const std::uint64_t whole = (length - 1) / block_bytes;
  return {whole, ((length - 1) - whole * block_bytes) / stripe_bytes};
}

/// Little-endian word of the 8 bytes at `p` (any alignment).
TANDEM_XXH3_HD std::uint64_t read_le(const unsigned char* p) {
  std::uint64_t w = 0;
  for (int b = 7; b >= 0; --b) w = (w << 8) | p[b];
  return w;
}

/// The keys one lane uses: stripe s of a block keyed by secret word s + lane, the scramble by
/// word 16 + lane, the last stripe by the word at byte 121 + 8 lane.
struct lane_keys {
  std::uint64_t stripe[stripes_per_block];
  std::uint64_t scramble;
  std::uint64_t last;
};
TANDEM_XXH3_HD lane_keys keys_of_lane(const keys& k, int lane) {
  lane_keys l;
  TANDEM_XXH3_UNROLL
  for (int s = 0; s < static_cast<int>(stripes_per_block); ++s) l.stripe[s] = k.stripe[s + lane];
  l.scramble = k.stripe[16 + lane];
  l.last = k.last[lane];
  return l;
}

/// Byte ranges read as one stream: segment i holds the stream's bytes [start[i], start[i + 1]) at
/// base[i] (start[0] = 0; empty segments allowed). One range is one segment.
struct segments {
  const unsigned char* const* base;  ///< [count]
  const std::uint64_t* start;        ///< [count + 1]
  std::uint32_t count;
};

/// The segment holding stream byte v (< start[count]): the last i < count with start[i] <= v.
TANDEM_XXH3_HD std::uint32_t segment_of(const segments& s, std::uint64_t v) {
  std::uint32_t lo = 0, hi = s.count - 1;
  while (lo < hi) {
    const std::uint32_t mid = lo + (hi - lo + 1) / 2;
    if (s.start[mid] <= v) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/// Stream byte v's address, `seg` moved forward to its segment (v at or past start[seg]).
TANDEM_XXH3_HD const unsigned char* address_of(const segments& s, std::uint32_t& seg, std::uint64_t v) {
  while (s.start[seg + 1] <= v) ++seg;
  return s.base[seg] + (v - s.start[seg]);
}

/// The little-endian word of stream bytes v .. v + 7, byte by byte (they may span segments).
TANDEM_XXH3_HD std::uint64_t word_at(const segments& s, std::uint32_t seg, std::uint64_t v) {
  std::uint64_t w = 0;
  for (int b = 0; b < 8; ++b) w |= static_cast<std::uint64_t>(*address_of(s, seg, v + b)) << (8 * b);
  return w;
}

/// The stripe at stream byte v when its 64 bytes lie in one segment, else null; `seg` moved
/// forward to v's segment.
TANDEM_XXH3_HD const unsigned char* stripe_at(const segments& s, std::uint32_t& seg, std::uint64_t v) {
  const unsigned char* p = address_of(s, seg, v);
  return s.start[seg + 1] - v >= stripe_bytes ? p : nullptr;
}

/// Lane `lane`'s own word d[lane] and its partner's d[lane ^ 1] of the stripe at stream byte v,
/// byte by byte.
TANDEM_XXH3_HD void pair_by_bytes(const segments& s, std::uint32_t seg, std::uint64_t v, int lane, std::uint64_t& own,
                                  std::uint64_t& partner) {
  const std::uint64_t w0 = word_at(s, seg, v + 16 * (lane >> 1)), w1 = word_at(s, seg, v + 16 * (lane >> 1) + 8);
  own = (lane & 1) ? w1 : w0;
  partner = (lane & 1) ? w0 : w1;
}

/// Accumulator `lane` of the long path over stream bytes [begin, begin + length) (length > 240,
/// begin a multiple of 64), its stripes read through `read`: read.pair(v, own, partner) for the
/// stripe at v on the 64-byte grid, read.last_pair(v, own, partner) for the last 64 bytes (any
/// offset). A whole block's loads come before its arithmetic, so they are in flight together.
template <class Reader>
TANDEM_XXH3_HD std::uint64_t lane_hash(int lane, std::uint64_t begin, std::uint64_t length, const lane_keys& key,
                                       Reader& read) {
  std::uint64_t acc = lane_init(lane);
  const layout l = layout_of(length);
  for (std::uint64_t b = 0; b < l.whole_blocks; ++b) {
    std::uint64_t own[stripes_per_block], partner[stripes_per_block];
    TANDEM_XXH3_UNROLL
    for (int s = 0; s < static_cast<int>(stripes_per_block); ++s)
      read.pair(begin + b * block_bytes + s * stripe_bytes, own[s], partner[s]);
    TANDEM_XXH3_UNROLL
    for (int s = 0; s < static_cast<int>(stripes_per_block); ++s) acc = lane_accumulate(acc, own[s], partner[s], key.stripe[s]);
    acc = lane_scramble(acc, key.scramble);
  }
  TANDEM_XXH3_UNROLL
  for (int s = 0; s < static_cast<int>(stripes_per_block); ++s) {
    if (static_cast<std::uint64_t>(s) >= l.tail_stripes) break;
    std::uint64_t own, partner;
    read.pair(begin + l.whole_blocks * block_bytes + s * stripe_bytes, own, partner);
    acc = lane_accumulate(acc, own, partner, key.stripe[s]);
  }
  std::uint64_t own, partner;
  read.last_pair(begin + length - stripe_bytes, own, partner);
  return lane_accumulate(acc, own, partner, key.last);
}

/// XXH3_64bits of stream bytes [begin, begin + length) of `s` (length > 240, begin a multiple of
/// 64) on the host, its eight lanes one after another as a GPU's threads run them: the reference
/// the device kernel is held to, itself held to libxxhash.
std::uint64_t hash_long(const segments& s, std::uint64_t begin, std::uint64_t length, const keys& k);

/// The same over one range of `length` (> 240) bytes.
std::uint64_t hash_long(const unsigned char* data, std::uint64_t length, const keys& k);

}  // namespace tandem::gpu::xxh3
