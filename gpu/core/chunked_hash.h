// The weight-stream hash: XXH3-64 of each fixed-size chunk, then XXH3-64 of the chunk hashes and
// the length. The refit bucket checksum (actors/api/messages.hpp bucket_checksum), the weights
// digest of every engine (engine/weight_source.h) and the fake engines' hashes all use it. Chunks
// hash independently: device_hash.h computes the same value over device memory, eight threads a
// chunk (xxh3_lanes.h), the small final hash on the host.
//
// Definition, bit for bit (XXH3_64bits is xxHash's XXH3 64-bit hash, seed 0, default secret,
// whose output is stable since xxHash 0.8.0, as Debian's libxxhash-dev ships it):
//
//   C     = chunked_hash_chunk_bytes = 1 MiB = 1,048,576 bytes
//   L     = the input's length in bytes
//   n     = ceil(L / C) chunks; chunk i = bytes [i * C, min((i + 1) * C, L)), so only the last
//           chunk may be shorter than C, and none is empty (L = 0: n = 0)
//   h_i   = XXH3_64bits(chunk i)                                       for i in 0 .. n - 1
//   A     = the (n + 1) * 8 bytes of the uint64 array [h_0, h_1, ..., h_{n-1}, L], each element
//           little-endian (L = 0: A is [0], eight zero bytes)
//   result = XXH3_64bits(A)
//
// The length closes the array, so inputs that differ only by trailing zero bytes, or by where the
// last chunk ends, hash apart. Chunk boundaries are counted from the start of the whole input:
// chunked_xxh3_stream hashes the concatenation of everything given to update() and returns
// exactly chunked_xxh3 of that concatenation, however it was split into spans.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace tandem::gpu {

/// C of the definition above: the chunk size, 1 MiB. Part of the hash's definition; changing it
/// changes every checksum and digest (bump the control protocol version, orchestration/control).
inline constexpr std::size_t chunked_hash_chunk_bytes = std::size_t{1} << 20;

/// The chunked XXH3-64 of `bytes` (the definition above).
[[nodiscard]] std::uint64_t chunked_xxh3(std::span<const std::byte> bytes);

/// h_i of the definition: XXH3_64bits of one chunk's bytes (at most C of them).
[[nodiscard]] std::uint64_t chunk_hash(std::span<const std::byte> chunk);

/// The result of the definition from its h_0 .. h_{n-1} (computed elsewhere: device_hash.h) and L.
[[nodiscard]] std::uint64_t chunked_xxh3_of_chunks(std::span<const std::uint64_t> chunk_hashes, std::uint64_t length);

/// The same hash over a byte stream given in pieces: after update(s_1), ..., update(s_k),
/// digest() is chunked_xxh3 of the concatenation s_1 s_2 ... s_k, whatever the pieces' sizes
/// (empty ones included). Pieces need not start on chunk boundaries; only the bytes of a chunk that
/// straddles two pieces go through XXH3's streaming state (same value, xxHash guarantees it).
/// Move-only (a moved-from stream may only be assigned to or destroyed); not thread-safe.
class chunked_xxh3_stream {
 public:
  chunked_xxh3_stream();
  ~chunked_xxh3_stream();
  chunked_xxh3_stream(chunked_xxh3_stream&&) noexcept;
  chunked_xxh3_stream& operator=(chunked_xxh3_stream&&) noexcept;

  /// Appends `bytes` to the stream.
  void update(std::span<const std::byte> bytes);
  /// chunked_xxh3 of every byte appended so far; the stream stays open for more.
  [[nodiscard]] std::uint64_t digest() const;

 private:
  struct state;
  std::unique_ptr<state> state_;
};

}  // namespace tandem::gpu
