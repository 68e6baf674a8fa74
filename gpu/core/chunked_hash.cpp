// The chunked XXH3-64 (chunked_hash.h): the one-shot form, and the stream that equals it.
#include "gpu/core/chunked_hash.h"

#include <xxhash.h>
#if TANDEM_XXH3_DISPATCH
#include <xxh_x86dispatch.h>  // XXH3_64bits and its _update on the widest vector unit found at run time
#endif

#include <algorithm>
#include <bit>
#include <new>
#include <vector>

static_assert(XXH_VERSION_NUMBER >= 800, "XXH3's output is stable from xxHash 0.8.0 on");

namespace tandem::gpu {
namespace {

constexpr std::size_t chunk = chunked_hash_chunk_bytes;

std::uint64_t to_little_endian(std::uint64_t x) {
  if constexpr (std::endian::native == std::endian::big) return __builtin_bswap64(x);
  return x;
}

/// XXH3_64bits of the little-endian array `a` = [h_0, ..., h_{n-1}, L] (rewritten in place).
std::uint64_t hash_of_array(std::vector<std::uint64_t>& a) {
  for (auto& x : a) x = to_little_endian(x);
  return XXH3_64bits(a.data(), a.size() * sizeof(std::uint64_t));
}

}  // namespace

std::uint64_t chunked_xxh3(std::span<const std::byte> bytes) {
  std::vector<std::uint64_t> a;  // U64 [n + 1]: the chunk hashes, then the length
  a.reserve(bytes.size() / chunk + 2);
  for (std::size_t at = 0; at < bytes.size(); at += chunk)
    a.push_back(XXH3_64bits(bytes.data() + at, std::min(chunk, bytes.size() - at)));
  a.push_back(bytes.size());
  return hash_of_array(a);
}

std::uint64_t chunk_hash(std::span<const std::byte> chunk) { return XXH3_64bits(chunk.data(), chunk.size()); }

std::uint64_t chunked_xxh3_of_chunks(std::span<const std::uint64_t> chunk_hashes, std::uint64_t length) {
  std::vector<std::uint64_t> a(chunk_hashes.begin(), chunk_hashes.end());
  a.push_back(length);
  return hash_of_array(a);
}

struct chunked_xxh3_stream::state {
  XXH3_state_t* partial;             // XXH3 of the unfinished chunk's bytes so far (fill of them)
  std::size_t fill = 0;              // < chunk
  std::vector<std::uint64_t> hashes; // U64 [finished chunks]: h_i of every finished chunk
  std::uint64_t length = 0;          // bytes appended so far

  state() : partial(XXH3_createState()) {
    if (!partial) throw std::bad_alloc();
  }
  ~state() { XXH3_freeState(partial); }
  state(const state&) = delete;
  state& operator=(const state&) = delete;
};

chunked_xxh3_stream::chunked_xxh3_stream() : state_(std::make_unique<state>()) {}
chunked_xxh3_stream::~chunked_xxh3_stream() = default;
chunked_xxh3_stream::chunked_xxh3_stream(chunked_xxh3_stream&&) noexcept = default;
chunked_xxh3_stream& chunked_xxh3_stream::operator=(chunked_xxh3_stream&&) noexcept = default;

void chunked_xxh3_stream::update(std::span<const std::byte> bytes) {
  state& s = *state_;
  s.length += bytes.size();
  while (!bytes.empty()) {
    if (s.fill == 0 && bytes.size() >= chunk) {  // a whole chunk inside this piece: one-shot
      s.hashes.push_back(XXH3_64bits(bytes.data(), chunk));
      bytes = bytes.subspan(chunk);
      continue;
    }
    const std::size_t take = std::min(chunk - s.fill, bytes.size());
    if (s.fill == 0) XXH3_64bits_reset(s.partial);
    XXH3_64bits_update(s.partial, bytes.data(), take);
    s.fill += take;
    bytes = bytes.subspan(take);
    if (s.fill == chunk) {
      s.hashes.push_back(XXH3_64bits_digest(s.partial));
      s.fill = 0;
    }
  }
}

std::uint64_t chunked_xxh3_stream::digest() const {
  const state& s = *state_;
  std::vector<std::uint64_t> a;  // U64 [n + 1]
  a.reserve(s.hashes.size() + 2);
  a.assign(s.hashes.begin(), s.hashes.end());
  if (s.fill > 0) a.push_back(XXH3_64bits_digest(s.partial));
  a.push_back(s.length);
  return hash_of_array(a);
}

}  // namespace tandem::gpu
