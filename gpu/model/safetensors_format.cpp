// Parsing and validation of safetensors headers, and their serialisation.
#include "gpu/model/safetensors_format.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "gpu/model/json_text.h"

namespace tandem::gpu {
namespace {

using json = nlohmann::json;

struct dtype_row {
  st_dtype type;
  std::string_view name;
  int bits;
};

constexpr std::array<dtype_row, 20> dtype_table{{
    {st_dtype::boolean, "BOOL", 8}, {st_dtype::u8, "U8", 8},         {st_dtype::i8, "I8", 8},
    {st_dtype::u16, "U16", 16},     {st_dtype::i16, "I16", 16},      {st_dtype::u32, "U32", 32},
    {st_dtype::i32, "I32", 32},     {st_dtype::u64, "U64", 64},      {st_dtype::i64, "I64", 64},
    {st_dtype::f16, "F16", 16},     {st_dtype::bf16, "BF16", 16},    {st_dtype::f32, "F32", 32},
    {st_dtype::f64, "F64", 64},     {st_dtype::c64, "C64", 64},      {st_dtype::f8_e4m3, "F8_E4M3", 8},
    {st_dtype::f8_e5m2, "F8_E5M2", 8}, {st_dtype::f8_e8m0, "F8_E8M0", 8}, {st_dtype::f4, "F4", 4},
    {st_dtype::f6_e2m3, "F6_E2M3", 6}, {st_dtype::f6_e3m2, "F6_E3M2", 6},
}};

// Thrown inside this file only; parse_st_header turns it into its status.
struct header_error {
  std::string what;
};

[[noreturn]] void fail(std::string what) { throw header_error{std::move(what)}; }

std::int64_t read_le64(std::span<const std::byte> b) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<std::uint64_t>(b[static_cast<std::size_t>(i)]);
  return v > static_cast<std::uint64_t>(INT64_MAX) ? -1 : static_cast<std::int64_t>(v);
}

// A JSON integer >= 0 that fits int64, else an error naming `what`.
std::int64_t non_negative(const json& v, const std::string& what) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(INT64_MAX)) fail(what + " " + v.dump() + " is too large");
    return static_cast<std::int64_t>(u);
  }
  if (v.is_number_integer()) {
    const auto i = v.get<std::int64_t>();
    if (i < 0) fail(what + " " + v.dump() + " is negative");
    return i;
  }
  fail(what + " must be a non-negative integer, got " + v.dump().substr(0, 40));
}

st_tensor read_tensor(const std::string& name, const json& v) {
  const std::string at = "tensor " + quote_name(name);
  if (name.empty()) fail("a tensor has an empty name");
  if (!v.is_object()) fail(at + ": expected an object {dtype, shape, data_offsets}, got " + v.dump().substr(0, 40));
  for (const auto& [key, _] : v.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") fail(at + ": unknown field " + quote_name(key));
  }
  st_tensor t;
  t.name = name;
  const auto d = v.find("dtype");
  if (d == v.end()) fail(at + ": missing dtype");
  if (!d->is_string()) fail(at + ": dtype must be a string, got " + d->dump().substr(0, 40));
  const auto type = parse_st_dtype(d->get<std::string>());
  if (!type) fail(at + ": unknown dtype " + quote_name(d->get<std::string>()));
  t.type = *type;

  const auto s = v.find("shape");
  if (s == v.end()) fail(at + ": missing shape");
  if (!s->is_array()) fail(at + ": shape must be an array, got " + s->dump().substr(0, 40));
  if (s->size() > 64) fail(at + ": shape has " + std::to_string(s->size()) + " dimensions");
  std::int64_t elements = 1;
  for (const json& extent : *s) {
    const std::int64_t e = non_negative(extent, at + ": shape extent");
    t.shape.push_back(e);
    if (__builtin_mul_overflow(elements, e, &elements)) fail(at + ": shape " + s->dump() + " overflows 64 bits");
  }

  const auto o = v.find("data_offsets");
  if (o == v.end()) fail(at + ": missing data_offsets");
  if (!o->is_array() || o->size() != 2) fail(at + ": data_offsets must be [begin, end], got " + o->dump().substr(0, 60));
  t.begin = non_negative((*o)[0], at + ": data_offsets begin");
  t.end = non_negative((*o)[1], at + ": data_offsets end");
  if (t.end < t.begin) fail(at + ": data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end) + "] end before they begin");

  std::int64_t bits = 0;
  if (__builtin_mul_overflow(elements, static_cast<std::int64_t>(bits_of(t.type)), &bits))
    fail(at + ": shape " + s->dump() + " overflows 64 bits in " + std::string(to_string(t.type)));
  if (bits % 8 != 0) fail(at + ": " + std::to_string(elements) + " elements of " + std::string(to_string(t.type)) + " are not a whole number of bytes");
  if (bits / 8 != t.bytes())
    fail(at + ": " + std::string(to_string(t.type)) + " " + s->dump() + " is " + std::to_string(bits / 8) +
         " bytes but data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end) + "] hold " +
         std::to_string(t.bytes()));
  return t;
}

std::string range(const st_tensor& t) {
  return "[" + std::to_string(t.begin) + ", " + std::to_string(t.end) + ")";
}

// The tensors must tile [0, data_bytes): inside it, no overlap, no gap, nothing after the last.
void check_tiling(std::vector<st_tensor>& tensors, std::int64_t data_bytes) {
  for (const st_tensor& t : tensors) {
    if (t.end > data_bytes)
      fail("tensor " + quote_name(t.name) + ": bytes " + range(t) + " lie past the end of the " +
           std::to_string(data_bytes) + "-byte data section (the file is truncated or the offsets are wrong)");
  }
  std::sort(tensors.begin(), tensors.end(),
            [](const st_tensor& a, const st_tensor& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  std::int64_t expected = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const st_tensor& t = tensors[i];
    if (t.begin < expected)
      fail("tensor " + quote_name(t.name) + ": bytes " + range(t) + " overlap tensor " + quote_name(tensors[i - 1].name) + " " +
           range(tensors[i - 1]));
    if (t.begin > expected)
      fail("bytes [" + std::to_string(expected) + ", " + std::to_string(t.begin) + ") of the data section before tensor " +
           quote_name(t.name) + " belong to no tensor");
    expected = t.end;
  }
  if (expected != data_bytes)
    fail("the data section has " + std::to_string(data_bytes - expected) + " bytes after the last tensor" +
         (tensors.empty() ? std::string() : " (" + quote_name(tensors.back().name) + " ends at " + std::to_string(expected) + ")"));
}

}  // namespace

std::string_view to_string(st_dtype t) {
  for (const auto& row : dtype_table)
    if (row.type == t) return row.name;
  return "?";
}

std::optional<st_dtype> parse_st_dtype(std::string_view name) {
  for (const auto& row : dtype_table)
    if (row.name == name) return row.type;
  return std::nullopt;
}

int bits_of(st_dtype t) {
  for (const auto& row : dtype_table)
    if (row.type == t) return row.bits;
  return 0;
}

std::optional<dtype> compute_dtype_of(st_dtype t) {
  switch (t) {
    case st_dtype::f32: return dtype::float32;
    case st_dtype::bf16: return dtype::bfloat16;
    case st_dtype::f16: return dtype::float16;
    default: return std::nullopt;
  }
}

st_dtype st_dtype_of(dtype t) {
  switch (t) {
    case dtype::float32: return st_dtype::f32;
    case dtype::bfloat16: return st_dtype::bf16;
    case dtype::float16: return st_dtype::f16;
    case dtype::float64: return st_dtype::f64;
    case dtype::int32: return st_dtype::i32;
    case dtype::uint8: return st_dtype::u8;
  }
  return st_dtype::f32;
}

std::int64_t st_tensor::elements() const {
  std::int64_t n = 1;
  for (std::int64_t e : shape) n *= e;
  return n;
}

const st_tensor* st_header::find(std::string_view name) const {
  auto it = index.find(name);
  return it == index.end() ? nullptr : &tensors[it->second];
}

result<std::int64_t> st_header_extent(std::span<const std::byte> first8, std::int64_t file_size, const std::string& source) {
  if (file_size < 8 || first8.size() < 8)
    return status(status_code::invalid_argument, source + ": " + std::to_string(file_size) +
                                                     " bytes, too short for a safetensors file (8-byte header length, then the header)");
  const std::int64_t n = read_le64(first8);
  if (n < 0 || n > st_max_header_bytes)
    return status(status_code::invalid_argument, source + ": header length " +
                                                     (n < 0 ? std::string("2^63 or more") : std::to_string(n)) +
                                                     " exceeds the " + std::to_string(st_max_header_bytes) +
                                                     "-byte limit (not a safetensors file?)");
  if (n < 2)
    return status(status_code::invalid_argument, source + ": header length " + std::to_string(n) + " is too short for a JSON object");
  if (8 + n > file_size)
    return status(status_code::invalid_argument, source + ": header length " + std::to_string(n) + " is larger than the file (" +
                                                     std::to_string(file_size) + " bytes): truncated or not a safetensors file");
  return 8 + n;
}

result<st_header> parse_st_header(std::span<const std::byte> prefix, std::int64_t file_size, const std::string& source) {
  const auto extent = st_header_extent(prefix, file_size, source);
  if (!extent) return extent.error();
  if (static_cast<std::int64_t>(prefix.size()) < *extent)
    return status(status_code::invalid_argument, source + ": header not fully read");
  st_header h;
  h.header_bytes = *extent - 8;
  h.data_begin = *extent;
  h.data_bytes = file_size - *extent;
  std::string_view text(reinterpret_cast<const char*>(prefix.data()) + 8, static_cast<std::size_t>(h.header_bytes));
  if (text.front() != '{')
    return status(status_code::invalid_argument, source + ": the header does not start with '{' (not a safetensors file?)");
  auto parsed = parse_json_strict(text, source + ": header", 4);
  if (!parsed) return parsed.error();
  try {
    if (!parsed->is_object()) fail("the header is not a JSON object");
    for (const auto& [name, value] : parsed->items()) {
      if (name == "__metadata__") {
        if (!value.is_object()) fail("__metadata__ must be an object of strings");
        for (const auto& [k, v] : value.items()) {
          if (!v.is_string()) fail("__metadata__ " + quote_name(k) + " must be a string, got " + v.dump().substr(0, 40));
          h.metadata[k] = v.get<std::string>();
        }
        continue;
      }
      h.tensors.push_back(read_tensor(name, value));
    }
    check_tiling(h.tensors, h.data_bytes);
  } catch (const header_error& e) {
    return status(status_code::invalid_argument, source + ": " + e.what);
  } catch (const std::exception& e) {
    return status(status_code::invalid_argument, source + ": header: " + e.what());
  }
  for (std::size_t i = 0; i < h.tensors.size(); ++i) h.index.emplace(h.tensors[i].name, i);
  return h;
}

std::string st_serialize_header(const std::vector<st_tensor>& tensors, const std::map<std::string, std::string>& metadata) {
  json root = json::object();
  if (!metadata.empty()) root["__metadata__"] = metadata;
  for (const st_tensor& t : tensors) {
    root[t.name] = json{{"dtype", std::string(to_string(t.type))}, {"shape", t.shape}, {"data_offsets", {t.begin, t.end}}};
  }
  std::string text = root.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  std::uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + text;
}

}  // namespace tandem::gpu
