// Tests of the safetensors header parser (gpu/model/safetensors_format.h) on files written byte by
// byte (support/safetensors_bytes.h): valid headers of every kind, then one malformed input per
// rule, each error naming the file and the tensor or key at fault; serialisation round trips; and
// st_file::open (gpu/model/safetensors_file.h) on real files.
#include "gpu/model/safetensors_format.h"

#include <boost/test/unit_test.hpp>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "gpu/model/safetensors_file.h"
#include "support/safetensors_bytes.h"
#include "support/temp_dir.h"

namespace tg = tandem::gpu;
namespace tt = tandem::test;

namespace {

const std::string source = "ckpt/model-00001-of-00002.safetensors";

std::span<const std::byte> as_bytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

tg::st_header parse_ok(const std::string& file) {
  auto r = tg::parse_st_header(as_bytes(file), static_cast<std::int64_t>(file.size()), source);
  BOOST_REQUIRE_MESSAGE(r.has_value(), (r.has_value() ? "" : r.error().message()));
  return *r;
}

// The error of parsing `file`; it must be invalid_argument and start with the source.
tg::status parse_error(const std::string& file) {
  auto r = tg::parse_st_header(as_bytes(file), static_cast<std::int64_t>(file.size()), source);
  BOOST_REQUIRE_MESSAGE(!r.has_value(), "expected a header error");
  const tg::status& s = r.error();
  BOOST_TEST((s.code() == tg::status_code::invalid_argument), s.message());
  BOOST_TEST(s.message().starts_with(source + ": "), s.message());
  return s;
}

// Checks that the error of parsing `file` names every one of `fragments`.
void expect_error(const std::string& file, const std::vector<std::string>& fragments) {
  const tg::status s = parse_error(file);
  for (const std::string& f : fragments) BOOST_TEST(s.message().find(f) != std::string::npos, "'" << f << "' in: " << s.message());
}

// A file of one tensor entry given verbatim (`entry_json` is the value of "a") and `data_bytes`
// bytes of data.
std::string one_tensor(const std::string& entry_json, std::int64_t data_bytes) {
  return tt::st_bytes("{\"a\": " + entry_json + "}", tt::st_pattern(data_bytes));
}

bool has_control_character(const std::string& s) {
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f) return true;
  }
  return false;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(safetensors_format)

// --- valid headers -------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(a_valid_header_gives_every_tensor_its_dtype_shape_and_offsets) {
  const std::vector<tt::st_spec> specs = {
      {"w.f32", "F32", {2, 3}}, {"w.bf16", "BF16", {4}},    {"w.f16", "F16", {1, 2}},
      {"ids", "I64", {3}},      {"bytes", "U8", {5}},       {"mask", "BOOL", {2}},
      {"fp8", "F8_E4M3", {3}},  {"scalar", "F64", {}},      {"pos", "I32", {2, 1}},
  };
  const std::string header = tt::st_header_json(specs, R"({"format": "pt", "note": "x"})");
  const tg::st_header h = parse_ok(tt::st_valid_bytes(specs, R"({"format": "pt", "note": "x"})"));
  BOOST_TEST(h.header_bytes == static_cast<std::int64_t>(header.size()));
  BOOST_TEST(h.data_begin == 8 + h.header_bytes);
  BOOST_TEST(h.data_bytes == tt::st_data_bytes(specs));
  BOOST_TEST(h.data_bytes == 24 + 8 + 4 + 24 + 5 + 2 + 3 + 8 + 8);
  BOOST_REQUIRE(h.tensors.size() == specs.size());
  std::int64_t offset = 0;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    BOOST_TEST_CONTEXT(specs[i].name) {
      const tg::st_tensor& t = h.tensors[i];
      BOOST_TEST(t.name == specs[i].name);
      BOOST_TEST(tg::to_string(t.type) == specs[i].dtype);
      BOOST_TEST(t.shape == specs[i].shape);
      BOOST_TEST(t.begin == offset);
      BOOST_TEST(t.bytes() == tt::st_spec_bytes(specs[i]));
      BOOST_TEST(t.elements() == tt::st_spec_elements(specs[i]));
      BOOST_TEST(h.find(specs[i].name) == &t);
      offset = t.end;
    }
  }
  BOOST_TEST(h.find("absent") == nullptr);
  BOOST_TEST(h.find("__metadata__") == nullptr);
  BOOST_TEST(h.metadata.size() == 2u);
  BOOST_TEST(h.metadata.at("format") == "pt");
  BOOST_TEST(h.metadata.at("note") == "x");
  BOOST_TEST((tg::compute_dtype_of(h.find("w.bf16")->type) == tg::dtype::bfloat16));
  BOOST_TEST((tg::compute_dtype_of(h.find("w.f16")->type) == tg::dtype::float16));
  BOOST_TEST((tg::compute_dtype_of(h.find("w.f32")->type) == tg::dtype::float32));
  BOOST_TEST(!tg::compute_dtype_of(h.find("ids")->type).has_value());
}

BOOST_AUTO_TEST_CASE(tensors_come_out_in_data_order_whatever_order_the_header_lists_them) {
  const std::string header = "{" + tt::st_entry_json("second", "F32", {2}, 8, 16) + ", " +
                             tt::st_entry_json("third", "U8", {4}, 16, 20) + ", " +
                             tt::st_entry_json("first", "I32", {2}, 0, 8) + "}";
  const tg::st_header h = parse_ok(tt::st_bytes(header, tt::st_pattern(20)));
  BOOST_REQUIRE(h.tensors.size() == 3u);
  BOOST_TEST(h.tensors[0].name == "first");
  BOOST_TEST(h.tensors[1].name == "second");
  BOOST_TEST(h.tensors[2].name == "third");
  BOOST_TEST(h.find("second")->begin == 8);
  BOOST_TEST(h.find("third")->end == 20);
}

BOOST_AUTO_TEST_CASE(zero_element_tensors_take_no_bytes_at_the_start_middle_or_end) {
  const std::string header = "{" + tt::st_entry_json("empty.start", "F32", {0}, 0, 0) + ", " +
                             tt::st_entry_json("a", "F32", {2}, 0, 8) + ", " +
                             tt::st_entry_json("empty.middle", "BF16", {0, 4}, 8, 8) + ", " +
                             tt::st_entry_json("b", "U8", {3}, 8, 11) + ", " +
                             tt::st_entry_json("empty.end", "I64", {4, 0, 2}, 11, 11) + "}";
  const tg::st_header h = parse_ok(tt::st_bytes(header, tt::st_pattern(11)));
  BOOST_REQUIRE(h.tensors.size() == 5u);
  for (const char* name : {"empty.start", "empty.middle", "empty.end"}) {
    BOOST_REQUIRE_MESSAGE(h.find(name), name);
    BOOST_TEST(h.find(name)->bytes() == 0, name);
    BOOST_TEST(h.find(name)->elements() == 0, name);
  }
  BOOST_TEST(h.find("empty.end")->begin == 11);
}

BOOST_AUTO_TEST_CASE(a_scalar_has_an_empty_shape_and_one_element) {
  const tg::st_header h = parse_ok(one_tensor(R"({"dtype": "F32", "shape": [], "data_offsets": [0, 4]})", 4));
  BOOST_TEST(h.find("a")->shape.empty());
  BOOST_TEST(h.find("a")->elements() == 1);
}

BOOST_AUTO_TEST_CASE(trailing_spaces_pad_the_header_and_belong_to_it) {
  const std::vector<tt::st_spec> specs = {{"a", "F32", {3}}};
  const std::string header = tt::st_header_json(specs) + std::string(5, ' ');
  const tg::st_header h = parse_ok(tt::st_bytes(header, tt::st_pattern(12)));
  BOOST_TEST(h.header_bytes == static_cast<std::int64_t>(header.size()));
  BOOST_TEST(h.data_begin == 8 + static_cast<std::int64_t>(header.size()));
  BOOST_TEST(h.data_bytes == 12);
  BOOST_TEST(h.find("a")->bytes() == 12);
}

BOOST_AUTO_TEST_CASE(a_header_without_tensors_describes_an_empty_data_section) {
  BOOST_TEST(parse_ok(tt::st_bytes("{}")).tensors.empty());
  const tg::st_header h = parse_ok(tt::st_bytes(R"({"__metadata__": {"format": "pt"}})"));
  BOOST_TEST(h.tensors.empty());
  BOOST_TEST(h.data_bytes == 0);
  BOOST_TEST(h.metadata.at("format") == "pt");
}

BOOST_AUTO_TEST_CASE(a_prefix_longer_than_the_header_is_enough_and_a_shorter_one_is_refused) {
  const std::string file = tt::st_valid_bytes({{"a", "F32", {4}}});
  const std::int64_t size = static_cast<std::int64_t>(file.size());
  const std::string header_only = file.substr(0, file.size() - 16);  // 8 + N bytes, no data
  auto r = tg::parse_st_header(as_bytes(header_only), size, source);
  BOOST_REQUIRE_MESSAGE(r.has_value(), (r.has_value() ? "" : r.error().message()));
  BOOST_TEST(r->find("a")->end == 16);
  auto cut = tg::parse_st_header(as_bytes(header_only.substr(0, header_only.size() - 1)), size, source);
  BOOST_REQUIRE(!cut.has_value());
  BOOST_TEST(cut.error().message().starts_with(source + ": "), cut.error().message());
}

BOOST_AUTO_TEST_CASE(every_dtype_spelling_parses_back_to_itself) {
  const std::vector<std::pair<std::string, int>> table = {
      {"BOOL", 8},     {"U8", 8},       {"I8", 8},       {"U16", 16},     {"I16", 16},
      {"U32", 32},     {"I32", 32},     {"U64", 64},     {"I64", 64},     {"F16", 16},
      {"BF16", 16},    {"F32", 32},     {"F64", 64},     {"C64", 64},     {"F8_E4M3", 8},
      {"F8_E5M2", 8},  {"F8_E8M0", 8},  {"F4", 4},       {"F6_E2M3", 6},  {"F6_E3M2", 6},
  };
  for (const auto& [name, bits] : table) {
    const auto t = tg::parse_st_dtype(name);
    BOOST_REQUIRE_MESSAGE(t.has_value(), name);
    BOOST_TEST(tg::to_string(*t) == name);
    BOOST_TEST(tg::bits_of(*t) == bits, name);
  }
  BOOST_TEST(!tg::parse_st_dtype("f32").has_value());
  BOOST_TEST(!tg::parse_st_dtype("FP32").has_value());
  BOOST_TEST(!tg::parse_st_dtype("").has_value());
}

BOOST_AUTO_TEST_CASE(packed_types_are_valid_when_they_fill_whole_bytes) {
  const tg::st_header f4 = parse_ok(one_tensor(R"({"dtype": "F4", "shape": [2, 3], "data_offsets": [0, 3]})", 3));
  BOOST_TEST(f4.find("a")->bytes() == 3);
  const tg::st_header f6 = parse_ok(one_tensor(R"({"dtype": "F6_E2M3", "shape": [4], "data_offsets": [0, 3]})", 3));
  BOOST_TEST(f6.find("a")->bytes() == 3);
  expect_error(one_tensor(R"({"dtype": "F4", "shape": [3], "data_offsets": [0, 2]})", 2),
               {"tensor 'a'", "3 elements of F4", "not a whole number of bytes"});
}

// --- the length field ----------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(a_file_shorter_than_8_bytes_is_refused_with_its_size) {
  expect_error("", {"0 bytes", "too short"});
  expect_error(std::string(5, '\0'), {"5 bytes", "too short"});
  expect_error(tt::le64(2).substr(0, 7), {"7 bytes", "too short"});
}

BOOST_AUTO_TEST_CASE(a_header_length_larger_than_the_file_is_refused) {
  const std::string header = tt::st_header_json({{"a", "F32", {2}}});
  expect_error(tt::st_bytes_with_length(1000, header, tt::st_pattern(8)),
               {"header length 1000", "larger than the file", std::to_string(8 + header.size() + 8) + " bytes"});
  // One byte more than the file holds.
  const std::string exact = tt::st_bytes("{}");
  expect_error(tt::st_bytes_with_length(3, "{}"), {"header length 3", "larger than the file (10 bytes)"});
  BOOST_TEST(parse_ok(exact).tensors.empty());
}

BOOST_AUTO_TEST_CASE(a_header_length_above_the_100_mb_limit_is_refused_before_reading_it) {
  const std::int64_t huge_file = 300'000'000;
  const std::string first8 = tt::le64(100'000'001);
  auto r = tg::parse_st_header(as_bytes(first8), huge_file, source);
  BOOST_REQUIRE(!r.has_value());
  BOOST_TEST(r.error().message().starts_with(source + ": "), r.error().message());
  BOOST_TEST(r.error().message().find("100000001") != std::string::npos, r.error().message());
  BOOST_TEST(r.error().message().find("100000000-byte limit") != std::string::npos, r.error().message());
  // The limit itself is allowed: the extent to read is 8 + N.
  auto at_limit = tg::st_header_extent(as_bytes(tt::le64(100'000'000)), huge_file, source);
  BOOST_REQUIRE_MESSAGE(at_limit.has_value(), (at_limit.has_value() ? "" : at_limit.error().message()));
  BOOST_TEST(*at_limit == 100'000'008);
  auto above = tg::st_header_extent(as_bytes(tt::le64(100'000'001)), huge_file, source);
  BOOST_TEST(!above.has_value());
}

BOOST_AUTO_TEST_CASE(a_header_length_of_2_to_the_63_or_more_is_refused_not_wrapped_negative) {
  for (std::uint64_t n : {std::uint64_t{1} << 63, (std::uint64_t{1} << 63) + 16, ~std::uint64_t{0}}) {
    BOOST_TEST_CONTEXT("length " << n) {
      const tg::status s = parse_error(tt::st_bytes_with_length(n, "{}"));
      BOOST_TEST(s.message().find("2^63") != std::string::npos, s.message());
      BOOST_TEST(s.message().find("length -") == std::string::npos, s.message());
    }
  }
}

BOOST_AUTO_TEST_CASE(a_header_length_too_short_for_a_json_object_is_refused) {
  expect_error(tt::st_bytes_with_length(0, "", "data"), {"header length 0", "too short"});
  expect_error(tt::st_bytes("{"), {"header length 1", "too short"});
}

// --- the JSON ------------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(garbage_json_is_reported_with_its_line_and_column) {
  expect_error(tt::st_bytes("{\n  \"a\": @}"), {source + ": header: invalid JSON at line 2, column 8: "});
  expect_error(tt::st_bytes(R"({"a": {"dtype": "F32")"), {"invalid JSON at line 1"});
  expect_error(tt::st_bytes("{} ]"), {"invalid JSON at line 1, column 4"});
  expect_error(tt::st_bytes("{\"a\": {\"dtype\": \"F32\",, \"shape\": [1]}}"), {"invalid JSON at line 1, column 23"});
}

BOOST_AUTO_TEST_CASE(a_header_that_is_not_a_json_object_is_refused) {
  expect_error(tt::st_bytes("[1, 2]"), {"does not start with '{'"});
  expect_error(tt::st_bytes("\"a string\""), {"does not start with '{'"});
  expect_error(tt::st_bytes(" {}"), {"does not start with '{'"});
  expect_error(tt::st_bytes(std::string(16, '\0')), {"does not start with '{'"});
}

BOOST_AUTO_TEST_CASE(a_duplicate_tensor_name_is_refused_by_name) {
  const std::string header = "{" + tt::st_entry_json("layer.w", "F32", {2}, 0, 8) + ", " +
                             tt::st_entry_json("layer.w", "F32", {2}, 8, 16) + "}";
  expect_error(tt::st_bytes(header, tt::st_pattern(16)), {"duplicate key 'layer.w'"});
  // The same name spelled with an escape is the same name.
  const std::string escaped = "{" + tt::st_entry_json("ab", "F32", {2}, 0, 8) + R"(, "a\u0062": )" +
                              R"({"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}})";
  expect_error(tt::st_bytes(escaped, tt::st_pattern(16)), {"duplicate key 'ab'"});
}

BOOST_AUTO_TEST_CASE(a_duplicate_field_inside_a_tensor_is_refused_with_its_path) {
  expect_error(one_tensor(R"({"dtype": "F32", "dtype": "BF16", "shape": [2], "data_offsets": [0, 8]})", 8),
               {"duplicate key 'a.dtype'"});
  expect_error(tt::st_bytes(R"({"__metadata__": {"format": "pt", "format": "np"}})"),
               {"duplicate key '__metadata__.format'"});
}

BOOST_AUTO_TEST_CASE(nesting_deeper_than_a_header_needs_is_refused_with_its_path) {
  expect_error(one_tensor(R"({"dtype": "F32", "shape": [[[1]]], "data_offsets": [0, 4]})", 4),
               {"nested deeper than 4 levels", "'a.shape[][]'"});
}

// --- tensor entries ------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(an_unknown_dtype_is_refused_naming_the_tensor) {
  expect_error(one_tensor(R"({"dtype": "F33", "shape": [2], "data_offsets": [0, 8]})", 8),
               {"tensor 'a': unknown dtype 'F33'"});
  expect_error(one_tensor(R"({"dtype": "f32", "shape": [2], "data_offsets": [0, 8]})", 8),
               {"tensor 'a': unknown dtype 'f32'"});
  expect_error(one_tensor(R"({"dtype": 32, "shape": [2], "data_offsets": [0, 8]})", 8),
               {"tensor 'a': dtype must be a string, got 32"});
}

BOOST_AUTO_TEST_CASE(an_unknown_field_in_a_tensor_is_refused_by_name) {
  expect_error(one_tensor(R"({"dtype": "F32", "shape": [2], "data_offsets": [0, 8], "offsets": [0, 8]})", 8),
               {"tensor 'a': unknown field 'offsets'"});
}

BOOST_AUTO_TEST_CASE(a_missing_dtype_shape_or_data_offsets_is_refused_by_name) {
  expect_error(one_tensor(R"({"shape": [2], "data_offsets": [0, 8]})", 8), {"tensor 'a': missing dtype"});
  expect_error(one_tensor(R"({"dtype": "F32", "data_offsets": [0, 8]})", 8), {"tensor 'a': missing shape"});
  expect_error(one_tensor(R"({"dtype": "F32", "shape": [2]})", 8), {"tensor 'a': missing data_offsets"});
}

BOOST_AUTO_TEST_CASE(a_tensor_entry_that_is_not_an_object_is_refused_by_name) {
  expect_error(tt::st_bytes(R"({"a": [0, 8]})", tt::st_pattern(8)), {"tensor 'a': expected an object"});
  expect_error(tt::st_bytes(R"({"a": "F32"})"), {"tensor 'a': expected an object"});
}

BOOST_AUTO_TEST_CASE(a_negative_fractional_or_non_numeric_shape_extent_is_refused) {
  expect_error(one_tensor(R"({"dtype": "F32", "shape": [2, -1], "data_offsets": [0, 8]})", 8),
               {"tensor 'a': shape extent -1 is negative"});
  expect_error(one_tensor(R"({"dtype": "F32", "shape": [2.0], "data_offsets": [0, 8]})", 8),
               {"tensor 'a': shape extent must be a non-negative integer, got 2.0"});
  expect_error(one_tensor(R"({"dtype": "F32", "shape": ["2"], "data_offsets": [0, 8]})", 8),
               {"tensor 'a': shape extent must be a non-negative integer"});
  expect_error(one_tensor(R"({"dtype": "F32", "shape": [9223372036854775808], "data_offsets": [0, 8]})", 8),
               {"tensor 'a': shape extent 9223372036854775808 is too large"});
  expect_error(one_tensor(R"({"dtype": "F32", "shape": [18446744073709551616], "data_offsets": [0, 8]})", 8),
               {"tensor 'a': shape extent must be a non-negative integer"});
  expect_error(one_tensor(R"({"dtype": "F32", "shape": 2, "data_offsets": [0, 8]})", 8),
               {"tensor 'a': shape must be an array, got 2"});
}

BOOST_AUTO_TEST_CASE(a_shape_whose_size_overflows_64_bits_is_refused) {
  expect_error(one_tensor(R"({"dtype": "U8", "shape": [4294967296, 4294967296], "data_offsets": [0, 8]})", 8),
               {"tensor 'a': shape [4294967296,4294967296] overflows 64 bits"});
  // 2^62 elements fit, their 2^67 bits do not.
  expect_error(one_tensor(R"({"dtype": "BF16", "shape": [4611686018427387904], "data_offsets": [0, 8]})", 8),
               {"tensor 'a'", "overflows 64 bits"});
  std::string dims = "[";
  for (int i = 0; i < 65; ++i) dims += (i ? ", 1" : "1");
  expect_error(one_tensor(R"({"dtype": "U8", "shape": )" + dims + R"(], "data_offsets": [0, 1]})", 1),
               {"tensor 'a': shape has 65 dimensions"});
}

BOOST_AUTO_TEST_CASE(a_byte_length_that_disagrees_with_dtype_and_shape_is_refused) {
  expect_error(one_tensor(R"({"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 20]})", 20),
               {"tensor 'a': F32 [2,3] is 24 bytes but data_offsets [0, 20] hold 20"});
  // BF16 data labelled F32: half the bytes the header claims.
  expect_error(one_tensor(R"({"dtype": "BF16", "shape": [4], "data_offsets": [0, 16]})", 16),
               {"tensor 'a': BF16 [4] is 8 bytes but data_offsets [0, 16] hold 16"});
}

BOOST_AUTO_TEST_CASE(malformed_data_offsets_are_refused_by_name) {
  expect_error(one_tensor(R"({"dtype": "F32", "shape": [2], "data_offsets": [0]})", 8),
               {"tensor 'a': data_offsets must be [begin, end], got [0]"});
  expect_error(one_tensor(R"({"dtype": "F32", "shape": [2], "data_offsets": [0, 8, 16]})", 8),
               {"tensor 'a': data_offsets must be [begin, end]"});
  expect_error(one_tensor(R"({"dtype": "F32", "shape": [2], "data_offsets": {"begin": 0, "end": 8}})", 8),
               {"tensor 'a': data_offsets must be [begin, end]"});
  expect_error(one_tensor(R"({"dtype": "F32", "shape": [2], "data_offsets": [-8, 0]})", 8),
               {"tensor 'a': data_offsets begin -8 is negative"});
  expect_error(one_tensor(R"({"dtype": "F32", "shape": [2], "data_offsets": [0, "8"]})", 8),
               {"tensor 'a': data_offsets end must be a non-negative integer"});
  expect_error(one_tensor(R"({"dtype": "F32", "shape": [2], "data_offsets": [0, 18446744073709551615]})", 8),
               {"tensor 'a': data_offsets end 18446744073709551615 is too large"});
}

BOOST_AUTO_TEST_CASE(data_offsets_that_end_before_they_begin_are_refused) {
  expect_error(one_tensor(R"({"dtype": "F32", "shape": [2], "data_offsets": [16, 8]})", 16),
               {"tensor 'a': data_offsets [16, 8] end before they begin"});
}

// --- the tiling of the data section --------------------------------------------------------------

BOOST_AUTO_TEST_CASE(offsets_past_the_end_of_the_data_section_are_refused_as_truncation) {
  const std::vector<tt::st_spec> specs = {{"a", "F32", {2}}, {"b", "F32", {4}}};
  const std::string header = tt::st_header_json(specs);
  expect_error(tt::st_bytes(header, tt::st_pattern(20)),
               {"tensor 'b': bytes [8, 24) lie past the end of the 20-byte data section"});
  expect_error(tt::st_bytes(header), {"tensor 'a'", "past the end of the 0-byte data section"});
  // A zero-byte tensor beyond the end is no less wrong.
  const std::string beyond = "{" + tt::st_entry_json("a", "F32", {2}, 0, 8) + ", " +
                             tt::st_entry_json("z", "F32", {0}, 12, 12) + "}";
  expect_error(tt::st_bytes(beyond, tt::st_pattern(8)), {"tensor 'z': bytes [12, 12) lie past the end"});
}

BOOST_AUTO_TEST_CASE(overlapping_tensors_are_refused_naming_both) {
  const std::string header = "{" + tt::st_entry_json("a", "F32", {4}, 0, 16) + ", " +
                             tt::st_entry_json("b", "F32", {4}, 8, 24) + "}";
  expect_error(tt::st_bytes(header, tt::st_pattern(24)), {"tensor 'b': bytes [8, 24) overlap tensor 'a' [0, 16)"});
  const std::string same = "{" + tt::st_entry_json("a", "F32", {4}, 0, 16) + ", " +
                           tt::st_entry_json("b", "I32", {4}, 0, 16) + "}";
  expect_error(tt::st_bytes(same, tt::st_pattern(16)), {"overlap tensor", "[0, 16)"});
  const std::string inside = "{" + tt::st_entry_json("outer", "U8", {16}, 0, 16) + ", " +
                             tt::st_entry_json("inner", "U8", {4}, 4, 8) + "}";
  expect_error(tt::st_bytes(inside, tt::st_pattern(16)), {"tensor 'inner': bytes [4, 8) overlap tensor 'outer' [0, 16)"});
}

BOOST_AUTO_TEST_CASE(a_gap_between_tensors_is_refused_with_its_byte_range) {
  const std::string header = "{" + tt::st_entry_json("a", "F32", {4}, 0, 16) + ", " +
                             tt::st_entry_json("b", "F32", {4}, 20, 36) + "}";
  expect_error(tt::st_bytes(header, tt::st_pattern(36)),
               {"bytes [16, 20) of the data section before tensor 'b' belong to no tensor"});
  const std::string at_start = "{" + tt::st_entry_json("a", "F32", {4}, 4, 20) + "}";
  expect_error(tt::st_bytes(at_start, tt::st_pattern(20)), {"bytes [0, 4) of the data section before tensor 'a'"});
}

BOOST_AUTO_TEST_CASE(bytes_after_the_last_tensor_are_refused) {
  const std::string header = tt::st_header_json({{"a", "F32", {4}}});
  expect_error(tt::st_bytes(header, tt::st_pattern(20)),
               {"the data section has 4 bytes after the last tensor ('a' ends at 16)"});
  expect_error(tt::st_bytes("{}", "junk"), {"the data section has 4 bytes after the last tensor"});
}

// --- metadata and names --------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(metadata_must_be_an_object_of_strings) {
  expect_error(tt::st_bytes(R"({"__metadata__": {"format": "pt", "step": 1}})"),
               {"__metadata__ 'step' must be a string, got 1"});
  expect_error(tt::st_bytes(R"({"__metadata__": {"nested": {"a": "b"}}})"), {"__metadata__ 'nested' must be a string"});
  expect_error(tt::st_bytes(R"({"__metadata__": ["pt"]})"), {"__metadata__ must be an object of strings"});
  expect_error(tt::st_bytes(R"({"__metadata__": "pt"})"), {"__metadata__ must be an object of strings"});
}

BOOST_AUTO_TEST_CASE(an_empty_tensor_name_is_refused) {
  expect_error(tt::st_bytes("{" + tt::st_entry_json("", "F32", {2}, 0, 8) + "}", tt::st_pattern(8)),
               {"a tensor has an empty name"});
}

BOOST_AUTO_TEST_CASE(control_characters_in_names_are_escaped_in_messages) {
  const std::string evil = "evil\x1b[2J\nname";
  const std::string escaped = "'evil\\x1b[2J\\x0aname'";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {tt::st_bytes("{" + tt::st_entry_json(evil, "F99", {2}, 0, 8) + "}", tt::st_pattern(8)),
       "tensor " + escaped + ": unknown dtype"},
      {tt::st_bytes("{" + tt::st_entry_json("a", evil, {2}, 0, 8) + "}", tt::st_pattern(8)),
       "unknown dtype " + escaped},
      {tt::st_bytes("{" + tt::st_entry_json(evil, "F32", {2}, 0, 8) + ", " + tt::st_entry_json(evil, "F32", {2}, 8, 16) + "}",
                    tt::st_pattern(16)),
       "duplicate key " + escaped},
      {tt::st_bytes("{" + tt::json_string(evil) + R"(: {"dtype": "F32", "shape": [2], "data_offsets": [0, 8], )" +
                    tt::json_string(evil) + ": 1}}", tt::st_pattern(8)),
       "unknown field " + escaped},
      {tt::st_bytes(R"({"__metadata__": {)" + tt::json_string(evil) + ": 7}}"), "__metadata__ " + escaped},
      {tt::st_bytes("{" + tt::st_entry_json(evil, "F32", {2}, 0, 8) + "}", tt::st_pattern(12)), "('" + escaped.substr(1)},
  };
  for (const auto& [file, fragment] : cases) {
    const tg::status s = parse_error(file);
    BOOST_TEST(s.message().find(fragment) != std::string::npos, "'" << fragment << "' in: " << s.message());
    BOOST_TEST(!has_control_character(s.message()), "raw control character in: " << s.message());
  }
  // A raw (unescaped) control character inside a JSON string is a syntax error; its message must
  // not carry the character either.
  const tg::status raw = parse_error(tt::st_bytes("{\"ev\x1bil\": {}}"));
  BOOST_TEST(raw.message().find("invalid JSON at line 1") != std::string::npos, raw.message());
  BOOST_TEST(!has_control_character(raw.message()), "raw control character in: " << raw.message());
}

BOOST_AUTO_TEST_CASE(c1_control_characters_in_names_are_escaped_in_messages) {
  // U+009B is a one-character CSI on many terminals; in UTF-8 it is C2 9B.
  const tg::status s = parse_error(tt::st_bytes("{" + tt::st_entry_json("a\xc2\x9b" "2Jb", "F99", {2}, 0, 8) + "}", tt::st_pattern(8)));
  BOOST_TEST(s.message().find("tensor 'a\\u009b2Jb': unknown dtype") != std::string::npos, s.message());
  BOOST_TEST(s.message().find("\xc2\x9b") == std::string::npos, s.message());
}

BOOST_AUTO_TEST_CASE(a_nul_byte_is_invalid_json_and_not_the_end_of_the_header) {
  // nlohmann's lexer stops at a NUL: without the check, what follows it would be ignored.
  std::string header = "{" + tt::st_entry_json("a", "U8", {1}, 0, 1) + "}";
  header += std::string(1, '\0') + "garbage!{[x";
  const tg::status s = parse_error(tt::st_bytes(header, "x"));
  BOOST_TEST(s.message().find("invalid JSON at line 1, column " + std::to_string(header.find('\0') + 1) + ": a NUL byte") !=
                 std::string::npos,
             s.message());
}

BOOST_AUTO_TEST_CASE(quotes_and_backslashes_in_names_are_escaped_in_messages) {
  const tg::status s = parse_error(tt::st_bytes("{" + tt::st_entry_json("it's\\x", "F99", {2}, 0, 8) + "}", tt::st_pattern(8)));
  BOOST_TEST(s.message().find("tensor 'it\\'s\\\\x'") != std::string::npos, s.message());
}

// --- serialisation -------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(a_serialized_header_parses_back_to_the_same_tensors_and_is_8_byte_aligned) {
  std::vector<tg::st_tensor> tensors = {
      {"model.embed.weight", tg::st_dtype::bf16, {3, 5}, 0, 30},
      {"model.norm.weight", tg::st_dtype::f32, {5}, 30, 50},
      {"empty", tg::st_dtype::f16, {0, 7}, 50, 50},
      {"ids", tg::st_dtype::i64, {1}, 50, 58},
      {"scale", tg::st_dtype::f8_e4m3, {}, 58, 59},
      {"odd \"name\" with\ttab", tg::st_dtype::u8, {2}, 59, 61},
  };
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"tandem.step", "12"}};
  for (const bool with_metadata : {true, false}) {
    BOOST_TEST_CONTEXT("with metadata: " << with_metadata) {
      const std::string header = tg::st_serialize_header(tensors, with_metadata ? metadata : std::map<std::string, std::string>{});
      BOOST_TEST(header.size() % 8 == 0u);
      BOOST_REQUIRE(header.size() > 8u);
      std::uint64_t n = 0;
      for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(header[static_cast<std::size_t>(i)]);
      BOOST_TEST(n == header.size() - 8);
      BOOST_TEST(header[8] == '{');
      const tg::st_header h = parse_ok(header + tt::st_pattern(61));
      BOOST_TEST(h.data_begin == static_cast<std::int64_t>(header.size()));
      BOOST_TEST(h.data_begin % 8 == 0);
      BOOST_TEST(h.data_bytes == 61);
      BOOST_REQUIRE(h.tensors.size() == tensors.size());
      for (const tg::st_tensor& t : tensors) {
        const tg::st_tensor* back = h.find(t.name);
        BOOST_REQUIRE_MESSAGE(back, t.name);
        BOOST_TEST((back->type == t.type), t.name);
        BOOST_TEST(back->shape == t.shape, t.name);
        BOOST_TEST(back->begin == t.begin, t.name);
        BOOST_TEST(back->end == t.end, t.name);
      }
      BOOST_TEST((h.metadata == (with_metadata ? metadata : std::map<std::string, std::string>{})));
    }
  }
  // No tensors at all: "{}" padded to 8 bytes.
  const std::string empty = tg::st_serialize_header({}, {});
  BOOST_TEST(empty.size() % 8 == 0u);
  BOOST_TEST(parse_ok(empty).tensors.empty());
}

// --- st_file: the same checks on a mapped file ---------------------------------------------------

BOOST_AUTO_TEST_CASE(a_valid_file_opens_and_its_data_spans_hold_each_tensors_bytes) {
  tt::temp_dir dir;
  const std::vector<tt::st_spec> specs = {{"a", "F32", {2, 3}}, {"b", "BF16", {5}}, {"c", "U8", {0}}, {"d", "I64", {1}}};
  const std::string path = tt::write_valid_st(dir, "model.safetensors", specs, R"({"format": "pt"})");
  auto f = tg::st_file::open(path);
  BOOST_REQUIRE_MESSAGE(f.has_value(), (f.has_value() ? "" : f.error().message()));
  BOOST_TEST(f->path().string() == path);
  BOOST_TEST(f->file_bytes() == static_cast<std::int64_t>(std::filesystem::file_size(path)));
  BOOST_TEST(f->header().metadata.at("format") == "pt");
  std::int64_t offset = 0;
  for (const tt::st_spec& s : specs) {
    const tg::st_tensor* t = f->header().find(s.name);
    BOOST_REQUIRE_MESSAGE(t, s.name);
    const auto span = f->data(*t);
    BOOST_TEST(static_cast<std::int64_t>(span.size()) == tt::st_spec_bytes(s), s.name);
    const std::string expected = tt::st_pattern(tt::st_spec_bytes(s), offset);
    BOOST_TEST(std::string(reinterpret_cast<const char*>(span.data()), span.size()) == expected, s.name);
    f->will_read(*t);
    offset += tt::st_spec_bytes(s);
  }
  // Copies share the mapping and outlive the original.
  tg::st_file copy = *f;
  f = tg::status(tg::status_code::io_error, "dropped");
  BOOST_TEST(copy.data(*copy.header().find("d")).size() == 8u);
}

BOOST_AUTO_TEST_CASE(opening_a_missing_file_is_not_found_and_a_directory_is_an_io_error) {
  tt::temp_dir dir;
  auto missing = tg::st_file::open(dir.path() / "absent.safetensors");
  BOOST_REQUIRE(!missing.has_value());
  BOOST_TEST((missing.error().code() == tg::status_code::not_found));
  BOOST_TEST(missing.error().message().starts_with((dir.path() / "absent.safetensors").string() + ": "),
             missing.error().message());
  std::filesystem::create_directories(dir.path() / "d.safetensors");
  auto directory = tg::st_file::open(dir.path() / "d.safetensors");
  BOOST_REQUIRE(!directory.has_value());
  BOOST_TEST((directory.error().code() == tg::status_code::io_error));
  BOOST_TEST(directory.error().message().starts_with((dir.path() / "d.safetensors").string() + ": "),
             directory.error().message());
}

BOOST_AUTO_TEST_CASE(a_short_or_truncated_file_is_refused_naming_the_path_and_the_tensor) {
  tt::temp_dir dir;
  const std::string full = tt::st_valid_bytes({{"a", "F32", {2}}, {"b", "F32", {4}}});
  struct bad_file {
    std::string name, bytes, fragment;
  };
  const std::vector<bad_file> cases = {
      {"empty.safetensors", "", "0 bytes, too short"},
      {"five.safetensors", std::string("\x10\0\0\0\0", 5), "5 bytes, too short"},
      {"header-cut.safetensors", full.substr(0, 20), "larger than the file (20 bytes)"},
      {"data-cut.safetensors", full.substr(0, full.size() - 3), "tensor 'b': bytes [8, 24) lie past the end of the 21-byte"},
  };
  for (const bad_file& c : cases) {
    const std::string path = tt::write_bytes(dir, c.name, c.bytes);
    auto f = tg::st_file::open(path);
    BOOST_REQUIRE_MESSAGE(!f.has_value(), c.name);
    BOOST_TEST((f.error().code() == tg::status_code::invalid_argument), f.error().message());
    BOOST_TEST(f.error().message().starts_with(path + ": "), f.error().message());
    BOOST_TEST(f.error().message().find(c.fragment) != std::string::npos, "'" << c.fragment << "' in: " << f.error().message());
  }
}

BOOST_AUTO_TEST_SUITE_END()
