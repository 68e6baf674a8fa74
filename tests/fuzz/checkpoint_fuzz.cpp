// libFuzzer target over the checkpoint parsers: the safetensors header (gpu/model/safetensors_format.h)
// and model.safetensors.index.json (gpu/model/checkpoint_index.h). Every input is tried as both a
// whole safetensors file and an index text; each must parse or fail with a message, never crash,
// hang or allocate wildly. A header that parses must describe tensors that tile its data section
// exactly, in offset order, each as many bytes as its dtype and shape need, names unique, and its
// tensors and metadata re-serialised by st_serialize_header must parse again to the same header. An
// index that parses must name only plain *.safetensors shard files, `shards` being the sorted
// distinct set of its weight_map values. Built and run by run_fuzz.sh checkpoint.
//
// With TANDEM_CHECKPOINT_FUZZ_SEEDS=<folder> set, the binary instead writes valid small safetensors
// files and index texts, and a few near misses of each, into <folder> (the seed corpus) and exits.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpu/model/checkpoint_index.h"
#include "gpu/model/json_text.h"
#include "gpu/model/safetensors_format.h"

namespace tg = tandem::gpu;

namespace {

[[noreturn]] void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "checkpoint_fuzz: %s: %s\n", what, detail.c_str());
  std::abort();
}

/// A data section larger than this is not materialised for the re-serialisation check: the
/// re-serialised header alone is passed as the prefix of a file of the right size.
constexpr std::int64_t max_zero_fill = 1 << 20;

const std::string source = "fuzz.safetensors";

// ---------------------------------------------------------------------------------------------
// seeds

struct seed_tensor {
  std::string name;
  tg::st_dtype type;
  std::vector<std::int64_t> shape;
};

/// A whole safetensors file: the serialised header, then each tensor's bytes (a counting pattern).
std::string safetensors_file(const std::vector<seed_tensor>& specs, const std::map<std::string, std::string>& metadata) {
  std::vector<tg::st_tensor> tensors;
  std::int64_t offset = 0;
  for (const seed_tensor& s : specs) {
    tg::st_tensor t;
    t.name = s.name;
    t.type = s.type;
    t.shape = s.shape;
    t.begin = offset;
    t.end = offset + t.elements() * tg::bits_of(s.type) / 8;
    offset = t.end;
    tensors.push_back(t);
  }
  std::string file = tg::st_serialize_header(tensors, metadata);
  for (std::int64_t i = 0; i < offset; ++i) file += static_cast<char>(i * 7 + 1);
  return file;
}

/// `file` with its 8-byte header length replaced by `n`.
std::string with_length(std::string file, std::uint64_t n) {
  for (int i = 0; i < 8; ++i) file[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return file;
}

/// A file whose header is exactly `json` (no padding), followed by `data_bytes` zero bytes.
std::string raw_file(const std::string& json, std::size_t data_bytes) {
  return with_length(std::string(8, '\0') + json, json.size()) + std::string(data_bytes, '\0');
}

std::span<const std::byte> bytes_of(const std::string& s) { return std::as_bytes(std::span<const char>(s.data(), s.size())); }

void write_seed(const std::string& folder, const std::string& name, const std::string& content) {
  std::ofstream out(folder + "/" + name, std::ios::binary);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
  if (!out) fail("cannot write a seed into", folder);
}

void write_seeds(const std::string& folder) {
  using T = tg::st_dtype;
  const std::map<std::string, std::string> pt = {{"format", "pt"}};
  const std::string q = "model.language_model.layers.0.self_attn.q_proj.weight";
  const std::vector<std::pair<std::string, std::string>> valid_files = {
      {"st-f32", safetensors_file({{"weight", T::f32, {4}}}, {})},
      {"st-bf16-pt", safetensors_file({{q, T::bf16, {8, 4}}}, pt)},
      {"st-f16-3d", safetensors_file({{"model.language_model.embed_tokens.weight", T::f16, {2, 3, 4}}}, pt)},
      {"st-empty-tensor", safetensors_file({{"model.language_model.norm.weight", T::f32, {0}},
                                            {"model.language_model.layers.0.input_layernorm.weight", T::bf16, {3}}},
                                           {})},
      {"st-mixed", safetensors_file({{q, T::bf16, {4, 2}},
                                     {"model.language_model.layers.0.self_attn.k_proj.weight", T::f32, {2, 2}},
                                     {"model.language_model.layers.0.mlp.down_proj.weight", T::f16, {1, 3}},
                                     {"model.vision_tower.scale", T::u8, {5}},
                                     {"model.vision_tower.packed", T::f4, {2, 2}}},
                                    {{"format", "pt"}, {"producer", "tandem"}})},
      {"st-no-tensors", safetensors_file({}, pt)},
      {"st-scalar", safetensors_file({{"lm_head.scale", T::f64, {}}}, {})},
  };
  for (const auto& [name, file] : valid_files) {
    if (!tg::parse_st_header(bytes_of(file), static_cast<std::int64_t>(file.size()), source))
      fail("a valid seed does not parse", name);
    write_seed(folder, name, file);
  }
  const std::string f32 = valid_files[0].second;
  const std::vector<std::pair<std::string, std::string>> invalid_files = {
      {"st-bad-truncated", f32.substr(0, f32.size() - 1)},
      {"st-bad-trailing", f32 + std::string(4, '\0')},
      {"st-bad-length", with_length(f32, f32.size())},
      {"st-bad-overlap", raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                  R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                                  8)},
      {"st-bad-gap", raw_file(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}})", 3)},
      {"st-bad-duplicate", raw_file(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                                    R"("a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                                    2)},
      {"st-bad-dtype", raw_file(R"({"a":{"dtype":"F12","shape":[1],"data_offsets":[0,2]}})", 2)},
      {"st-bad-shape", raw_file(R"({"a":{"dtype":"BF16","shape":[3],"data_offsets":[0,4]}})", 4)},
      {"st-bad-metadata", raw_file(R"({"__metadata__":{"format":1}})", 0)},
  };
  for (const auto& [name, file] : invalid_files) {
    if (tg::parse_st_header(bytes_of(file), static_cast<std::int64_t>(file.size()), source))
      fail("an invalid seed parses", name);
    write_seed(folder, name, file);
  }

  const std::vector<std::pair<std::string, std::string>> valid_indexes = {
      {"index-one", R"({"metadata":{"total_size":64},"weight_map":{")" + q + R"(":"model.safetensors"}})"},
      {"index-two",
       R"({"metadata":{"total_size":123456},"weight_map":{)"
       R"("model.language_model.embed_tokens.weight":"model-00001-of-00002.safetensors",)"
       R"(")" + q + R"(":"model-00001-of-00002.safetensors",)"
       R"("model.language_model.norm.weight":"model-00002-of-00002.safetensors"}})"},
      {"index-no-metadata", R"({"weight_map":{"lm_head.weight":"b.safetensors","norm.weight":"a.safetensors"}})"},
      {"index-null-total", "{\n  \"metadata\": {\"total_size\": null, \"format\": \"pt\"},\n  \"weight_map\": {\"w\": \"x.safetensors\"}\n}\n"},
  };
  for (const auto& [name, text] : valid_indexes) {
    if (!tg::parse_checkpoint_index(text, source)) fail("a valid seed does not parse", name);
    write_seed(folder, name, text);
  }
  const std::vector<std::pair<std::string, std::string>> invalid_indexes = {
      {"index-bad-path", R"({"weight_map":{"w":"../model.safetensors"}})"},
      {"index-bad-suffix", R"({"weight_map":{"w":"model.bin"}})"},
      {"index-bad-duplicate", R"({"weight_map":{"w":"a.safetensors","w":"b.safetensors"}})"},
      {"index-bad-total", R"({"metadata":{"total_size":-1},"weight_map":{"w":"a.safetensors"}})"},
      {"index-bad-empty", R"({"metadata":{},"weight_map":{}})"},
  };
  for (const auto& [name, text] : invalid_indexes) {
    if (tg::parse_checkpoint_index(text, source)) fail("an invalid seed parses", name);
    write_seed(folder, name, text);
  }
}

// ---------------------------------------------------------------------------------------------
// properties

std::string describe(const tg::st_tensor& t) {
  std::string s = tg::quote_name(t.name) + " " + std::string(tg::to_string(t.type)) + " [";
  for (std::size_t i = 0; i < t.shape.size(); ++i) s += (i ? "," : "") + std::to_string(t.shape[i]);
  return s + "] [" + std::to_string(t.begin) + ", " + std::to_string(t.end) + ")";
}

/// The invariants every parsed header of a file of `file_size` bytes holds.
void check_header(const tg::st_header& h, std::int64_t file_size) {
  if (h.header_bytes < 2 || h.data_begin != 8 + h.header_bytes) fail("header extent", std::to_string(h.header_bytes));
  if (h.data_bytes < 0 || h.data_begin + h.data_bytes != file_size) fail("data section size", std::to_string(h.data_bytes));
  std::set<std::string> names;
  std::int64_t expected = 0;
  for (std::size_t i = 0; i < h.tensors.size(); ++i) {
    const tg::st_tensor& t = h.tensors[i];
    if (t.name.empty()) fail("a tensor has an empty name", describe(t));
    if (!names.insert(t.name).second) fail("a tensor name occurs twice", describe(t));
    if (t.begin < 0 || t.end < t.begin || t.end > h.data_bytes) fail("a tensor lies outside the data section", describe(t));
    if (t.begin != expected) fail("tensors are unsorted or do not tile the data section at", describe(t));
    expected = t.end;
    if (t.shape.size() > 64) fail("a tensor has more than 64 dimensions", describe(t));
    std::int64_t elements = 1;
    for (std::int64_t e : t.shape) {
      if (e < 0) fail("a negative extent", describe(t));
      if (__builtin_mul_overflow(elements, e, &elements)) fail("the element count overflows 64 bits", describe(t));
    }
    if (elements != t.elements()) fail("elements() disagrees with the shape", describe(t));
    std::int64_t bits = 0;
    std::int64_t eight_bytes = 0;
    if (__builtin_mul_overflow(elements, static_cast<std::int64_t>(tg::bits_of(t.type)), &bits) ||
        __builtin_mul_overflow(t.bytes(), std::int64_t{8}, &eight_bytes) || bits != eight_bytes)
      fail("elements x bits != 8 x bytes", describe(t));
    const auto at = h.index.find(t.name);
    if (at == h.index.end() || at->second != i || h.find(t.name) != &t) fail("the name index misses", describe(t));
  }
  if (expected != h.data_bytes) fail("tensors do not reach the end of the data section", std::to_string(expected));
  if (h.index.size() != h.tensors.size()) fail("the name index has extra names", std::to_string(h.index.size()));
}

/// Tensors ordered by name: the parser orders by offset and leaves ties (empty tensors at one
/// offset) in no particular order.
std::vector<tg::st_tensor> by_name(std::vector<tg::st_tensor> tensors) {
  std::sort(tensors.begin(), tensors.end(), [](const tg::st_tensor& a, const tg::st_tensor& b) { return a.name < b.name; });
  return tensors;
}

void check_reserialised(const tg::st_header& h) {
  const std::string header = tg::st_serialize_header(h.tensors, h.metadata);
  if (header.size() % 8 != 0) fail("a serialised header is not a multiple of 8 bytes", std::to_string(header.size()));
  const std::int64_t file_size = static_cast<std::int64_t>(header.size()) + h.data_bytes;
  // An exactly sized buffer, so that ASan sees any read past the prefix.
  std::size_t prefix_bytes = header.size();
  if (h.data_bytes <= max_zero_fill) prefix_bytes += static_cast<std::size_t>(h.data_bytes);
  std::unique_ptr<std::byte[]> file(new std::byte[prefix_bytes]());
  std::copy_n(reinterpret_cast<const std::byte*>(header.data()), header.size(), file.get());
  const auto again = tg::parse_st_header(std::span<const std::byte>(file.get(), prefix_bytes), file_size, "reserialised");
  if (!again) fail("a re-serialised header does not parse", again.error().message());
  check_header(*again, file_size);
  if (again->data_bytes != h.data_bytes) fail("re-serialising changed the data section size", std::to_string(again->data_bytes));
  if (again->metadata != h.metadata) fail("re-serialising changed the metadata", std::to_string(again->metadata.size()));
  const auto a = by_name(h.tensors);
  const auto b = by_name(again->tensors);
  if (a.size() != b.size()) fail("re-serialising changed the tensor count", std::to_string(b.size()));
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].name != b[i].name || a[i].type != b[i].type || a[i].shape != b[i].shape || a[i].begin != b[i].begin ||
        a[i].end != b[i].end)
      fail("re-serialising changed a tensor", describe(a[i]) + " became " + describe(b[i]));
  }
}

void fuzz_header(std::span<const std::byte> bytes) {
  const auto size = static_cast<std::int64_t>(bytes.size());
  const auto h = tg::parse_st_header(bytes, size, source);
  if (!h) {
    if (h.error().code() != tg::status_code::invalid_argument) fail("an error that is not invalid_argument", h.error().message());
    if (!h.error().message().starts_with(source + ": ")) fail("an error that does not name its source", h.error().message());
    return;
  }
  const auto extent = tg::st_header_extent(bytes, size, source);
  if (!extent || *extent != h->data_begin) fail("st_header_extent disagrees with parse_st_header", std::to_string(h->data_begin));
  check_header(*h, size);
  check_reserialised(*h);
}

void fuzz_index(std::string_view text) {
  const auto index = tg::parse_checkpoint_index(text, source);
  if (!index) {
    if (index.error().code() != tg::status_code::invalid_argument) fail("an error that is not invalid_argument", index.error().message());
    if (!index.error().message().starts_with(source + ": ")) fail("an error that does not name its source", index.error().message());
    return;
  }
  if (index->weight_map.empty()) fail("an index without tensors parses", "");
  std::set<std::string> shards;
  for (const auto& [name, shard] : index->weight_map) {
    if (name.empty()) fail("an index names a tensor with an empty name", tg::quote_name(shard));
    if (shard.empty() || shard.find('/') != std::string::npos || !shard.ends_with(".safetensors"))
      fail("an index names a bad shard", tg::quote_name(shard));
    shards.insert(shard);
  }
  if (!std::equal(shards.begin(), shards.end(), index->shards.begin(), index->shards.end()))
    fail("shards is not the sorted distinct set of weight_map values", std::to_string(index->shards.size()));
  if (index->total_size && *index->total_size < 0) fail("a negative total_size", std::to_string(*index->total_size));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* folder = std::getenv("TANDEM_CHECKPOINT_FUZZ_SEEDS")) {
    write_seeds(folder);
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz_header(std::as_bytes(std::span<const std::uint8_t>(data, size)));
  fuzz_index(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
