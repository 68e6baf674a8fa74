// Safetensors files written by hand, byte for byte, for tests: the 8-byte little-endian length,
// the header JSON exactly as the test gives it, then the data bytes. Nothing here uses tandem's own
// writer or parser, so a test can produce any malformed file (a lying length, a duplicate key, a
// gap between tensors) as easily as a valid one. st_header_json builds a valid header for a list
// of tensors, offsets assigned in order.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/temp_dir.h"

namespace tandem::test {

/// The 8-byte little-endian encoding of `n`.
inline std::string le64(std::uint64_t n) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out;
}

/// A file whose length field is `length` (true or not), followed by `header_json` and `data`.
inline std::string st_bytes_with_length(std::uint64_t length, const std::string& header_json,
                                        const std::string& data = {}) {
  return le64(length) + header_json + data;
}

/// A file holding `header_json` (its true length in front) and then `data`.
inline std::string st_bytes(const std::string& header_json, const std::string& data = {}) {
  return st_bytes_with_length(header_json.size(), header_json, data);
}

/// Writes `bytes` to `name` inside `dir` (binary, folders created); returns the full path.
inline std::string write_bytes(const temp_dir& dir, const std::string& name, const std::string& bytes) {
  const auto p = dir.path() / name;
  std::filesystem::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) throw std::runtime_error("cannot write " + p.string());
  return p.string();
}

/// Writes st_bytes(header_json, data) to `name` inside `dir`; returns the full path.
inline std::string write_st(const temp_dir& dir, const std::string& name, const std::string& header_json,
                            const std::string& data = {}) {
  return write_bytes(dir, name, st_bytes(header_json, data));
}

/// One tensor of a hand-built header: its name, its dtype as spelled in the file, its shape.
struct st_spec {
  std::string name;
  std::string dtype = "F32";
  std::vector<std::int64_t> shape;
};

/// Bits per element of a dtype spelling, from the safetensors format description (not from
/// tandem's table); throws for a spelling this helper does not know.
inline int st_spec_bits(const std::string& dtype) {
  if (dtype == "F4") return 4;
  if (dtype == "F6_E2M3" || dtype == "F6_E3M2") return 6;
  if (dtype == "BOOL" || dtype == "U8" || dtype == "I8" || dtype.starts_with("F8_")) return 8;
  if (dtype == "U16" || dtype == "I16" || dtype == "F16" || dtype == "BF16") return 16;
  if (dtype == "U32" || dtype == "I32" || dtype == "F32") return 32;
  if (dtype == "U64" || dtype == "I64" || dtype == "F64" || dtype == "C64") return 64;
  throw std::invalid_argument("st_spec_bits: unknown dtype " + dtype);
}

/// Elements of `s` (1 for a scalar).
inline std::int64_t st_spec_elements(const st_spec& s) {
  std::int64_t n = 1;
  for (std::int64_t e : s.shape) n *= e;
  return n;
}

/// Bytes of data of `s`.
inline std::int64_t st_spec_bytes(const st_spec& s) { return st_spec_elements(s) * st_spec_bits(s.dtype) / 8; }

/// Bytes of data of all of `tensors` together.
inline std::int64_t st_data_bytes(const std::vector<st_spec>& tensors) {
  std::int64_t n = 0;
  for (const st_spec& s : tensors) n += st_spec_bytes(s);
  return n;
}

/// `text` as a JSON string literal (quotes, backslashes and control characters escaped).
inline std::string json_string(const std::string& text) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out = "\"";
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20) {
      out += "\\u00";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

/// The JSON of one header entry: "name": {"dtype": ..., "shape": [...], "data_offsets": [b, e]}.
inline std::string st_entry_json(const std::string& name, const std::string& dtype,
                                 const std::vector<std::int64_t>& shape, std::int64_t begin, std::int64_t end) {
  std::string out = json_string(name) + ": {\"dtype\": " + json_string(dtype) + ", \"shape\": [";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "], \"data_offsets\": [" + std::to_string(begin) + ", " + std::to_string(end) + "]}";
}

/// A valid header for `tensors`, laid out one after another in the order given. `metadata_json`,
/// when not empty, is spliced in verbatim as the value of "__metadata__".
inline std::string st_header_json(const std::vector<st_spec>& tensors, const std::string& metadata_json = {}) {
  std::string out = "{";
  bool first = true;
  if (!metadata_json.empty()) {
    out += "\"__metadata__\": " + metadata_json;
    first = false;
  }
  std::int64_t offset = 0;
  for (const st_spec& s : tensors) {
    const std::int64_t bytes = st_spec_bytes(s);
    out += (first ? "" : ", ") + st_entry_json(s.name, s.dtype, s.shape, offset, offset + bytes);
    offset += bytes;
    first = false;
  }
  return out + "}";
}

/// `n` data bytes with a recognisable pattern, starting at pattern position `from`: byte i of the
/// data section is (i * 7 + 3) mod 256, so a test can tell which bytes a span covers.
inline std::string st_pattern(std::int64_t n, std::int64_t from = 0) {
  std::string out(static_cast<std::size_t>(n), '\0');
  for (std::int64_t i = 0; i < n; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>(((from + i) * 7 + 3) & 0xff);
  return out;
}

/// A whole valid file for `tensors`: st_header_json, then st_pattern over all the data.
inline std::string st_valid_bytes(const std::vector<st_spec>& tensors, const std::string& metadata_json = {}) {
  return st_bytes(st_header_json(tensors, metadata_json), st_pattern(st_data_bytes(tensors)));
}

/// Writes st_valid_bytes(tensors) to `name` inside `dir`; returns the full path.
inline std::string write_valid_st(const temp_dir& dir, const std::string& name, const std::vector<st_spec>& tensors,
                                  const std::string& metadata_json = {}) {
  return write_bytes(dir, name, st_valid_bytes(tensors, metadata_json));
}

}  // namespace tandem::test
