// The safetensors file format, parsed and validated: an 8-byte little-endian header length N, N
// bytes of JSON (name -> {dtype, shape, data_offsets}, plus an optional "__metadata__" map of
// strings), then the data section the offsets point into. The whole header is checked before any
// tensor is read: the length fits the file, the JSON is valid with unique keys, every dtype is
// known, dtype x shape equals the byte length, and the tensors tile the data section exactly (no
// overlap, no gap, nothing after the last one), as the reference implementation requires. Sizes and
// offsets are 64-bit throughout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpu/core/dtype.h"
#include "gpu/core/status.h"

namespace tandem::gpu {

/// Every element type a safetensors header may name. Model weights use f32, bf16 and f16; the
/// others appear in non-text parts of multimodal checkpoints and are carried through untouched.
enum class st_dtype {
  boolean, u8, i8, u16, i16, u32, i32, u64, i64, f16, bf16, f32, f64, c64,
  f8_e4m3, f8_e5m2, f8_e8m0, f4, f6_e2m3, f6_e3m2,
};

/// The header spelling ("BF16", "F8_E4M3", ...).
std::string_view to_string(st_dtype t);
/// Parses a header spelling; nullopt for an unknown one.
std::optional<st_dtype> parse_st_dtype(std::string_view name);
/// Bits per element (4 and 6 for the packed float formats).
int bits_of(st_dtype t);
/// The compute dtype of f32 / bf16 / f16; nullopt for every other type.
std::optional<dtype> compute_dtype_of(st_dtype t);
/// The file dtype of a compute dtype (float32 -> F32, ...).
st_dtype st_dtype_of(dtype t);

/// One tensor of a header.
struct st_tensor {
  std::string name;
  st_dtype type = st_dtype::f32;
  std::vector<std::int64_t> shape;
  std::int64_t begin = 0;  ///< first byte, relative to the start of the data section
  std::int64_t end = 0;    ///< one past the last byte, relative to the data section

  std::int64_t bytes() const { return end - begin; }
  std::int64_t elements() const;
};

/// A validated header.
struct st_header {
  std::int64_t header_bytes = 0;  ///< N, the JSON's length
  std::int64_t data_begin = 0;    ///< 8 + N: file offset of the data section
  std::int64_t data_bytes = 0;    ///< length of the data section (= file size - data_begin)
  std::vector<st_tensor> tensors;                    ///< in data order (ascending offsets)
  std::map<std::string, std::string> metadata;      ///< "__metadata__", e.g. {"format": "pt"}
  std::map<std::string, std::size_t, std::less<>> index;  ///< name -> position in `tensors`

  const st_tensor* find(std::string_view name) const;
};

/// Longest header accepted (the reference implementation's limit).
constexpr std::int64_t st_max_header_bytes = 100'000'000;

/// Validates the header of a file of `file_size` bytes whose first bytes are `prefix` (at least
/// the 8-byte length and the JSON it announces; more is ignored). Every error is invalid_argument,
/// starts with `source` and names the tensor or field at fault. Never throws, never reads outside
/// `prefix`.
result<st_header> parse_st_header(std::span<const std::byte> prefix, std::int64_t file_size, const std::string& source);

/// Bytes of a header that must be read to parse it: 8 + N, from the first 8 bytes of the file;
/// an error when the length is impossible for a file of `file_size` bytes.
result<std::int64_t> st_header_extent(std::span<const std::byte> first8, std::int64_t file_size, const std::string& source);

/// Serialises a header for `tensors` (offsets already assigned, tiling [0, total)), padded with
/// spaces to a multiple of 8 bytes as the reference writer does, with its 8-byte length in front.
std::string st_serialize_header(const std::vector<st_tensor>& tensors, const std::map<std::string, std::string>& metadata);

}  // namespace tandem::gpu
