// Tests of finding and opening the weight files of a checkpoint directory
// (gpu/model/checkpoint_files.h) and of the shard index (gpu/model/checkpoint_index.h), on files
// written byte by byte (support/safetensors_bytes.h): a single file, a sharded set, and every way
// the index and the shards can disagree, each error naming the file and the tensor or key.
#include "gpu/model/checkpoint_files.h"

#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "gpu/model/checkpoint_index.h"
#include "gpu/model/json_text.h"
#include "support/safetensors_bytes.h"
#include "support/temp_dir.h"

namespace tg = tandem::gpu;
namespace tt = tandem::test;
namespace fs = std::filesystem;

namespace {

const std::string shard1 = "model-00001-of-00002.safetensors";
const std::string shard2 = "model-00002-of-00002.safetensors";
const std::string index_name = "model.safetensors.index.json";

// An index whose weight_map is `entries` (tensor -> shard), in the order given.
std::string index_json(const std::vector<std::pair<std::string, std::string>>& entries,
                       const std::string& metadata = R"({"total_size": 0})") {
  std::string out = "{\"metadata\": " + metadata + ", \"weight_map\": {";
  for (std::size_t i = 0; i < entries.size(); ++i)
    out += (i ? ", " : "") + tt::json_string(entries[i].first) + ": " + tt::json_string(entries[i].second);
  return out + "}}";
}

// Two shards, a and b in the first, c in the second, and the index that says so.
void write_sharded(const tt::temp_dir& dir) {
  tt::write_valid_st(dir, shard1, {{"a", "F32", {2, 3}}, {"b", "BF16", {4}}}, R"({"format": "pt"})");
  tt::write_valid_st(dir, shard2, {{"c", "U8", {5}}});
  dir.write(index_name, index_json({{"a", shard1}, {"b", shard1}, {"c", shard2}}));
}

tg::checkpoint_files open_ok(const fs::path& dir) {
  auto r = tg::checkpoint_files::open(dir);
  BOOST_REQUIRE_MESSAGE(r.has_value(), (r.has_value() ? "" : r.error().message()));
  return std::move(r).value();
}

// The error of opening `dir`: of `code`, starting with `file` (a full path), naming every fragment.
void expect_open_error(const fs::path& dir, tg::status_code code, const std::string& file,
                       const std::vector<std::string>& fragments) {
  auto r = tg::checkpoint_files::open(dir);
  BOOST_REQUIRE_MESSAGE(!r.has_value(), "expected an error opening " << dir.string());
  const tg::status& s = r.error();
  BOOST_TEST((s.code() == code), tg::to_string(s.code()) << ": " << s.message());
  BOOST_TEST(s.message().starts_with(file + ": "), s.message());
  for (const std::string& f : fragments) BOOST_TEST(s.message().find(f) != std::string::npos, "'" << f << "' in: " << s.message());
}

std::string bytes_of(const tg::checkpoint_files& c, const tg::checkpoint_files::entry& e) {
  const auto span = c.file_of(e).data(*e.tensor);
  return {reinterpret_cast<const char*>(span.data()), span.size()};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(checkpoint_files)

// --- what opens ----------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(a_single_model_safetensors_opens_with_every_tensor) {
  tt::temp_dir dir;
  const std::vector<tt::st_spec> specs = {{"a", "F32", {2, 3}}, {"b", "BF16", {4}}, {"c", "I64", {1}}};
  const std::string path = tt::write_valid_st(dir, "model.safetensors", specs);
  dir.write("config.json", "{}");
  auto kind = tg::find_weights(dir.path());
  BOOST_REQUIRE(kind.has_value());
  BOOST_TEST((*kind == tg::weights_kind::single));
  const tg::checkpoint_files c = open_ok(dir.path());
  BOOST_TEST(!c.sharded());
  BOOST_TEST(c.directory() == dir.path());
  BOOST_TEST(c.manifest().string() == path);
  BOOST_REQUIRE(c.shards().size() == 1u);
  BOOST_REQUIRE(c.tensors().size() == 3u);
  BOOST_TEST(c.total_bytes() == static_cast<std::int64_t>(fs::file_size(path)));
  std::int64_t offset = 0;
  for (const tt::st_spec& s : specs) {
    const auto* e = c.find(s.name);
    BOOST_REQUIRE_MESSAGE(e, s.name);
    BOOST_TEST(e->shard == 0u);
    BOOST_TEST(e->tensor->name == s.name);
    BOOST_TEST(bytes_of(c, *e) == tt::st_pattern(tt::st_spec_bytes(s), offset), s.name);
    offset += tt::st_spec_bytes(s);
  }
  BOOST_TEST(c.find("absent") == nullptr);
}

BOOST_AUTO_TEST_CASE(a_sharded_checkpoint_opens_and_find_locates_each_tensor_in_its_shard) {
  tt::temp_dir dir;
  write_sharded(dir);
  auto kind = tg::find_weights(dir.path());
  BOOST_REQUIRE(kind.has_value());
  BOOST_TEST((*kind == tg::weights_kind::sharded));
  const tg::checkpoint_files c = open_ok(dir.path());
  BOOST_TEST(c.sharded());
  BOOST_TEST(c.manifest() == dir.path() / index_name);
  BOOST_REQUIRE(c.shards().size() == 2u);
  BOOST_TEST(c.shards()[0].path().filename().string() == shard1);
  BOOST_TEST(c.shards()[1].path().filename().string() == shard2);
  BOOST_TEST(c.total_bytes() == static_cast<std::int64_t>(fs::file_size(dir.path() / shard1) + fs::file_size(dir.path() / shard2)));
  const std::vector<std::pair<std::string, std::string>> where = {{"a", shard1}, {"b", shard1}, {"c", shard2}};
  BOOST_REQUIRE(c.tensors().size() == where.size());
  for (std::size_t i = 0; i < where.size(); ++i) {
    const auto& [name, shard] = where[i];
    const auto* e = c.find(name);
    BOOST_REQUIRE_MESSAGE(e, name);
    BOOST_TEST(c.file_of(*e).path().filename().string() == shard, name);
    BOOST_TEST(c.tensors()[i].tensor == e->tensor, name << " in shard order");
  }
  BOOST_TEST(bytes_of(c, *c.find("b")) == tt::st_pattern(8, 24));  // b follows a's 24 bytes in shard 1
  BOOST_TEST(bytes_of(c, *c.find("c")) == tt::st_pattern(5, 0));   // c starts shard 2
  BOOST_TEST(c.file_of(*c.find("a")).header().metadata.at("format") == "pt");
}

BOOST_AUTO_TEST_CASE(shards_may_be_listed_in_any_order_and_stray_files_are_ignored) {
  tt::temp_dir dir;
  tt::write_valid_st(dir, shard1, {{"a", "F32", {2}}});
  tt::write_valid_st(dir, shard2, {{"b", "F32", {2}}});
  dir.write(index_name, index_json({{"b", shard2}, {"a", shard1}}, R"({"total_size": 16, "format": "pt"})"));
  dir.write("pytorch_model.bin", "not read");
  dir.write("README.md", "weights");
  const tg::checkpoint_files c = open_ok(dir.path());
  BOOST_TEST(c.file_of(*c.find("a")).path().filename().string() == shard1);
  BOOST_TEST(c.file_of(*c.find("b")).path().filename().string() == shard2);
}

// --- the index and the shards disagree -----------------------------------------------------------

BOOST_AUTO_TEST_CASE(an_index_naming_a_missing_shard_is_not_found_naming_the_index_and_the_shard) {
  tt::temp_dir dir;
  write_sharded(dir);
  fs::remove(dir.path() / shard2);
  expect_open_error(dir.path(), tg::status_code::not_found, (dir.path() / index_name).string(),
                    {"shard '" + shard2 + "'", "tensor 'c'", "does not exist"});
}

BOOST_AUTO_TEST_CASE(an_index_mapping_a_tensor_to_a_shard_that_lacks_it_is_refused) {
  tt::temp_dir dir;
  tt::write_valid_st(dir, shard1, {{"a", "F32", {2}}});
  tt::write_valid_st(dir, shard2, {{"b", "F32", {2}}, {"c", "F32", {2}}});
  dir.write(index_name, index_json({{"a", shard1}, {"b", shard2}, {"c", shard1}}));
  expect_open_error(dir.path(), tg::status_code::invalid_argument, (dir.path() / index_name).string(),
                    {"tensor 'c'", (dir.path() / shard1).string() + ", which does not hold it", "(it is in '" + shard2 + "')"});
  // A tensor the index lists that no shard holds at all.
  dir.write(index_name, index_json({{"a", shard1}, {"b", shard2}, {"c", shard2}, {"ghost", shard1}}));
  expect_open_error(dir.path(), tg::status_code::invalid_argument, (dir.path() / index_name).string(),
                    {"tensor 'ghost'", "which does not hold it"});
}

BOOST_AUTO_TEST_CASE(a_shard_holding_a_tensor_the_index_does_not_list_is_refused) {
  tt::temp_dir dir;
  tt::write_valid_st(dir, shard1, {{"a", "F32", {2}}, {"unlisted", "F32", {2}}});
  tt::write_valid_st(dir, shard2, {{"b", "F32", {2}}});
  dir.write(index_name, index_json({{"a", shard1}, {"b", shard2}}));
  expect_open_error(dir.path(), tg::status_code::invalid_argument, (dir.path() / shard1).string(),
                    {"tensor 'unlisted' is not listed in " + (dir.path() / index_name).string()});
}

BOOST_AUTO_TEST_CASE(a_tensor_held_by_two_shards_is_refused_naming_the_one_the_index_does_not_name) {
  tt::temp_dir dir;
  tt::write_valid_st(dir, shard1, {{"a", "F32", {2}}});
  tt::write_valid_st(dir, shard2, {{"a", "F32", {2}}, {"b", "F32", {2}}});
  dir.write(index_name, index_json({{"a", shard1}, {"b", shard2}}));
  expect_open_error(dir.path(), tg::status_code::invalid_argument, (dir.path() / shard2).string(),
                    {"tensor 'a' is also in this shard", "maps it to '" + shard1 + "'"});
  // The same the other way round: the index maps a to the second shard.
  tt::write_valid_st(dir, shard1, {{"a", "F32", {2}}, {"x", "F32", {2}}});
  dir.write(index_name, index_json({{"a", shard2}, {"b", shard2}, {"x", shard1}}));
  expect_open_error(dir.path(), tg::status_code::invalid_argument, (dir.path() / shard1).string(),
                    {"tensor 'a'", "maps it to '" + shard2 + "'"});
}

BOOST_AUTO_TEST_CASE(a_truncated_shard_is_refused_naming_the_shard_and_the_tensor) {
  tt::temp_dir dir;
  write_sharded(dir);
  const fs::path p = dir.path() / shard1;
  fs::resize_file(p, fs::file_size(p) - 3);  // header intact, b's last bytes gone
  expect_open_error(dir.path(), tg::status_code::invalid_argument, p.string(),
                    {"tensor 'b'", "past the end of the 29-byte data section"});
}

BOOST_AUTO_TEST_CASE(a_bad_header_in_a_single_file_is_refused_naming_the_file_and_the_tensor) {
  tt::temp_dir dir;
  const std::string path =
      tt::write_st(dir, "model.safetensors", "{" + tt::st_entry_json("w", "F17", {2}, 0, 8) + "}", tt::st_pattern(8));
  expect_open_error(dir.path(), tg::status_code::invalid_argument, path, {"tensor 'w': unknown dtype 'F17'"});
}

// --- the index itself ----------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(a_shard_name_that_is_a_path_is_refused) {
  tt::temp_dir root;
  // Every file these names could reach exists, so only the name rule can refuse them.
  tt::write_valid_st(root, "x.safetensors", {{"a", "F32", {2}}});
  tt::write_valid_st(root, "ckpt/sub/x.safetensors", {{"a", "F32", {2}}});
  tt::write_valid_st(root, "ckpt/x.safetensors", {{"a", "F32", {2}}});
  const fs::path dir = root.path() / "ckpt";
  const std::string index = (dir / index_name).string();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"../x.safetensors", "is a path, not a file name"},
      {"sub/x.safetensors", "is a path, not a file name"},
      {"sub\\x.safetensors", "is a path, not a file name"},
      {(root.path() / "x.safetensors").string(), "is a path, not a file name"},
      {"", "is empty"},
      {"..", "is not a file name"},
      {"x.bin", "does not end in .safetensors"},
  };
  for (const auto& [shard, problem] : cases) {
    BOOST_TEST_CONTEXT("shard " << shard) {
      root.write("ckpt/" + index_name, index_json({{"a", shard}}));
      expect_open_error(dir, tg::status_code::invalid_argument, index,
                        {"weight_map 'a': shard " + tg::quote_name(shard) + " " + problem});
    }
  }
}

BOOST_AUTO_TEST_CASE(a_weight_map_missing_empty_or_not_an_object_is_refused) {
  tt::temp_dir dir;
  tt::write_valid_st(dir, shard1, {{"a", "F32", {2}}});
  const std::string index = (dir.path() / index_name).string();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"metadata": {"total_size": 8}})", "weight_map: missing"},
      {R"({"weight_map": {}})", "weight_map: names no tensor"},
      {R"({"weight_map": ["a", "model-00001-of-00002.safetensors"]})", "weight_map: expected an object"},
      {R"({"weight_map": "model-00001-of-00002.safetensors"})", "weight_map: expected an object"},
      {R"({"weight_map": {"a": 1}})", "weight_map 'a': expected a shard file name, got 1"},
      {R"({"weight_map": {"": "model-00001-of-00002.safetensors"}})", "weight_map: a tensor has an empty name"},
      {R"({"metadata": {"total_size": -1}, "weight_map": {"a": "model-00001-of-00002.safetensors"}})",
       "metadata.total_size: expected a non-negative integer, got -1"},
      {R"({"metadata": [], "weight_map": {"a": "model-00001-of-00002.safetensors"}})", "metadata: expected an object"},
      {R"(["weight_map"])", "expected a JSON object at the top level"},
  };
  for (const auto& [text, fragment] : cases) {
    BOOST_TEST_CONTEXT(text) {
      dir.write(index_name, text);
      expect_open_error(dir.path(), tg::status_code::invalid_argument, index, {fragment});
    }
  }
}

BOOST_AUTO_TEST_CASE(garbage_index_json_is_reported_with_its_line_and_column) {
  tt::temp_dir dir;
  tt::write_valid_st(dir, shard1, {{"a", "F32", {2}}});
  dir.write(index_name, "{\n  \"weight_map\": {\"a\": \"model-00001-of-00002.safetensors\",}\n}");
  expect_open_error(dir.path(), tg::status_code::invalid_argument, (dir.path() / index_name).string(),
                    {"invalid JSON at line 2, column 58"});
  dir.write(index_name, "");
  expect_open_error(dir.path(), tg::status_code::invalid_argument, (dir.path() / index_name).string(), {"invalid JSON"});
}

BOOST_AUTO_TEST_CASE(a_duplicate_key_in_the_index_is_refused_by_its_path) {
  tt::temp_dir dir;
  tt::write_valid_st(dir, shard1, {{"a", "F32", {2}}});
  tt::write_valid_st(dir, shard2, {{"b", "F32", {2}}});
  const std::string index = (dir.path() / index_name).string();
  dir.write(index_name, index_json({{"a", shard1}, {"b", shard2}, {"a", shard2}}));
  expect_open_error(dir.path(), tg::status_code::invalid_argument, index, {"duplicate key 'weight_map.a'"});
  dir.write(index_name, R"({"weight_map": {"a": "x.safetensors"}, "weight_map": {"a": "model-00001-of-00002.safetensors"}})");
  expect_open_error(dir.path(), tg::status_code::invalid_argument, index, {"duplicate key 'weight_map'"});
}

BOOST_AUTO_TEST_CASE(control_characters_in_index_names_are_escaped_in_messages) {
  tt::temp_dir dir;
  tt::write_valid_st(dir, shard1, {{"a", "F32", {2}}, {"b\x1b[31m", "F32", {2}}});
  dir.write(index_name, index_json({{"a", shard1}, {"evil\x1b]0;\x07", "../" + shard1}}));
  auto r = tg::checkpoint_files::open(dir.path());
  BOOST_REQUIRE(!r.has_value());
  BOOST_TEST(r.error().message().find("weight_map 'evil\\x1b]0;\\x07'") != std::string::npos, r.error().message());
  dir.write(index_name, index_json({{"a", shard1}}));
  auto unlisted = tg::checkpoint_files::open(dir.path());
  BOOST_REQUIRE(!unlisted.has_value());
  BOOST_TEST(unlisted.error().message().find("tensor 'b\\x1b[31m' is not listed") != std::string::npos,
             unlisted.error().message());
  for (const std::string& m : {r.error().message(), unlisted.error().message()}) {
    for (char ch : m) BOOST_TEST(static_cast<unsigned char>(ch) >= 0x20, "raw control character in: " << m);
  }
}

// --- what the directory holds --------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(both_model_safetensors_and_an_index_is_refused) {
  tt::temp_dir dir;
  write_sharded(dir);
  tt::write_valid_st(dir, "model.safetensors", {{"a", "F32", {2, 3}}});
  auto kind = tg::find_weights(dir.path());
  BOOST_REQUIRE(!kind.has_value());
  BOOST_TEST((kind.error().code() == tg::status_code::invalid_argument));
  BOOST_TEST(kind.error().message().starts_with(dir.path().string() + ": "), kind.error().message());
  BOOST_TEST(kind.error().message().find("model.safetensors and model.safetensors.index.json") != std::string::npos,
             kind.error().message());
  expect_open_error(dir.path(), tg::status_code::invalid_argument, dir.path().string(), {"holds both"});
}

BOOST_AUTO_TEST_CASE(only_pytorch_bin_files_are_unsupported) {
  tt::temp_dir dir;
  dir.write("config.json", "{}");
  dir.write("pytorch_model.bin", "pickle");
  auto kind = tg::find_weights(dir.path());
  BOOST_REQUIRE(!kind.has_value());
  BOOST_TEST((kind.error().code() == tg::status_code::unsupported));
  BOOST_TEST(kind.error().message().starts_with(dir.path().string() + ": "), kind.error().message());
  BOOST_TEST(kind.error().message().find("'pytorch_model.bin'") != std::string::npos, kind.error().message());
  expect_open_error(dir.path(), tg::status_code::unsupported, dir.path().string(), {"'pytorch_model.bin'"});
}

BOOST_AUTO_TEST_CASE(shards_without_their_index_are_unsupported) {
  tt::temp_dir dir;
  tt::write_valid_st(dir, shard1, {{"a", "F32", {2}}});
  auto kind = tg::find_weights(dir.path());
  BOOST_REQUIRE(!kind.has_value());
  BOOST_TEST((kind.error().code() == tg::status_code::unsupported));
  BOOST_TEST(kind.error().message().find(shard1) != std::string::npos, kind.error().message());
}

BOOST_AUTO_TEST_CASE(a_directory_without_weights_has_none_and_does_not_open) {
  tt::temp_dir dir;
  for (const bool with_config : {false, true}) {
    BOOST_TEST_CONTEXT("config.json present: " << with_config) {
      if (with_config) dir.write("config.json", "{}");
      auto kind = tg::find_weights(dir.path());
      BOOST_REQUIRE(kind.has_value());
      BOOST_TEST((*kind == tg::weights_kind::none));
      expect_open_error(dir.path(), tg::status_code::not_found, dir.path().string(), {"no weights"});
    }
  }
  expect_open_error(dir.path() / "absent", tg::status_code::not_found, (dir.path() / "absent").string(), {"no weights"});
}

BOOST_AUTO_TEST_SUITE_END()
