// `tandem inspect` and `tandem convert` on good and bad checkpoints (tools/cli/inspect_command.cpp,
// convert_command.cpp): what a good one prints, and for every kind of bad input one error line
// naming the file and the tensor or key, exit 1, from every command that takes --model (inspect,
// convert, logprobs, loss).
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "support/checkpoint_fixture.h"
#include "support/cli_runner.h"
#include "support/temp_dir.h"

namespace fs = std::filesystem;
namespace tg = tandem::gpu;
using tandem::test::checkpoint_builder;
using tandem::test::cli;
using tandem::test::cli_result;
using tandem::test::preset_config;
using tandem::test::temp_dir;
using tandem::test::wrapper;

namespace {

checkpoint_builder good(const temp_dir& t, wrapper w = wrapper::text_only) {
  checkpoint_builder b(t.path() / "ckpt");
  const std::string config = preset_config("tiny-all", w);
  b.set_config(config);
  b.add_text_stack(*tg::parse_model_config(config, "config.json"), tg::dtype::bfloat16);
  return b;
}

std::string le64(std::uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return s;
}

void write_raw(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes; }

std::string read_raw(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// Replaces the JSON header of `file` by `header` (its true length in front), keeping the data.
void replace_header(const fs::path& file, const std::string& header) {
  const std::string bytes = read_raw(file);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  write_raw(file, le64(header.size()) + header + bytes.substr(8 + n));
}

std::string header_of(const fs::path& file) {
  const std::string bytes = read_raw(file);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  return bytes.substr(8, n);
}

// Every command that takes --model refuses `dir` with exactly one line on stderr holding every
// part of `parts`.
void refused(const fs::path& dir, const std::vector<std::string>& parts) {
  const temp_dir scratch;
  const std::string tokens = scratch.write("tokens.json", "[[1, 2, 3]]");
  for (const std::vector<std::string>& a :
       {std::vector<std::string>{"inspect", "--model", dir.string()},
        std::vector<std::string>{"convert", "--model", dir.string(), "--out", (scratch.path() / "out").string()},
        std::vector<std::string>{"logprobs", "--model", dir.string(), "--tokens", tokens},
        std::vector<std::string>{"loss", "--model", dir.string(), "--tokens", tokens, "--gradients"}}) {
    const cli_result r = cli(a);
    BOOST_TEST(r.code == 1, a[0] << ": " << r.err);
    BOOST_TEST(std::count(r.err.begin(), r.err.end(), '\n') == 1, a[0] << " printed more than one line: " << r.err);
    BOOST_TEST(r.err.starts_with("tandem " + a[0] + ": "), r.err);
    for (const std::string& p : parts) BOOST_TEST(r.err.find(p) != std::string::npos, a[0] << ": '" << p << "' not in " << r.err);
    BOOST_TEST(!fs::exists(scratch.path() / "out"));
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cli_inspect)

BOOST_AUTO_TEST_CASE(inspect_prints_the_architecture_every_text_tensor_and_the_skipped_line) {
  temp_dir t;
  checkpoint_builder b = good(t, wrapper::multimodal);
  b.add_random("model.vision_tower.encoder.layers.0.mlp.fc1.weight", tg::dtype::bfloat16, {4, 4}, 1);
  b.add_random("model.embed_audio.embedding_projection.weight", tg::dtype::bfloat16, {64, 2}, 2);
  b.write();
  const cli_result r = cli({"inspect", "--model", b.dir().string()});
  BOOST_TEST(r.code == 0, r.err);
  BOOST_TEST(r.out.find("architecture  Gemma4ForConditionalGeneration (model_type gemma4, text prefix 'model.language_model.')") !=
             std::string::npos);
  BOOST_TEST(r.out.find("model.language_model.layers.5.mlp.down_proj.weight") != std::string::npos);
  BOOST_TEST(r.out.find("\nskipped 2 non-text tensors (288 B): model.vision_tower. 1 (32 B), model.embed_audio. 1 (256 B)\n") !=
             std::string::npos, r.out);

  const cli_result j = cli({"inspect", "--model", b.dir().string(), "--json"});
  BOOST_TEST(j.code == 0, j.err);
  const auto doc = nlohmann::json::parse(j.out);
  BOOST_TEST(doc["architecture"] == "Gemma4ForConditionalGeneration");
  BOOST_TEST(doc["text_tensors"].size() == 145u);
  BOOST_TEST(doc["skipped"].size() == 2u);
  BOOST_TEST(doc["config"]["layers"].size() == 6u);
  const auto& q = doc["text_tensors"][6];
  BOOST_TEST(q["name"] == "model.language_model.layers.0.self_attn.q_proj.weight");
  BOOST_TEST(q["offset"] == 31936);  // aligned to 64 elements
  BOOST_TEST(q["dtype"] == "BF16");
}

BOOST_AUTO_TEST_CASE(inspect_takes_a_preset_and_shows_its_layout_without_weights) {
  const cli_result r = cli({"inspect", "--model", "gemma-4-E2B"});
  BOOST_TEST(r.code == 0, r.err);
  BOOST_TEST(r.out.find("weights       none (a config-only directory)") != std::string::npos);
  BOOST_TEST(r.out.find("model.language_model.embed_tokens_per_layer.weight  [262144, 8960]") != std::string::npos);
  BOOST_TEST(cli({"inspect"}).code == 2);
  BOOST_TEST(cli({"inspect", "--model"}).code == 2);
  BOOST_TEST(cli({"inspect", "--model", "x", "--frobnicate"}).code == 2);
  BOOST_TEST(cli({"inspect", "--model", "no-such-model"}).code == 1);
}

BOOST_AUTO_TEST_CASE(a_truncated_file_is_refused_naming_the_file_and_the_tensor) {
  temp_dir t;
  checkpoint_builder b = good(t);
  b.write();
  const fs::path f = b.dir() / "model.safetensors";
  fs::resize_file(f, fs::file_size(f) - 100);
  refused(b.dir(), {f.string(), "tensor '", "past the end"});
  fs::resize_file(f, 5);
  refused(b.dir(), {f.string(), "too short"});
}

BOOST_AUTO_TEST_CASE(impossible_headers_are_refused_naming_the_file_and_the_tensor) {
  temp_dir t;
  checkpoint_builder b = good(t);
  b.write();
  const fs::path f = b.dir() / "model.safetensors";
  const std::string original = read_raw(f);
  const std::string header = header_of(f);

  write_raw(f, le64(1ull << 40) + original.substr(8));
  refused(b.dir(), {f.string(), "header length"});
  write_raw(f, le64(original.size()) + original.substr(8));
  refused(b.dir(), {f.string(), "larger than the file"});

  write_raw(f, original);
  replace_header(f, "{\"a\": [1, 2,");
  refused(b.dir(), {f.string(), "invalid JSON at line 1"});

  write_raw(f, original);
  auto j = nlohmann::json::parse(header);
  const std::string name = "model.norm.weight";
  auto offsets = j[name]["data_offsets"];
  j[name]["data_offsets"] = {offsets[0].get<std::int64_t>() + 2, offsets[1].get<std::int64_t>() + 2};
  replace_header(f, j.dump());
  refused(b.dir(), {f.string(), "tensor '"});  // an overlap with its neighbour or a gap before it

  write_raw(f, original);
  j = nlohmann::json::parse(header);
  j[name]["dtype"] = "BF17";
  replace_header(f, j.dump());
  refused(b.dir(), {f.string(), "tensor 'model.norm.weight': unknown dtype 'BF17'"});

  write_raw(f, original);
  std::string dup = header;
  const std::string entry = "\"" + name + "\":" + nlohmann::json::parse(header)[name].dump();
  dup.insert(1, entry + ",");
  replace_header(f, dup);
  refused(b.dir(), {f.string(), "duplicate key 'model.norm.weight'"});
}

BOOST_AUTO_TEST_CASE(wrong_missing_and_unexpected_tensors_are_refused_naming_the_file_and_the_tensor) {
  {
    temp_dir t;
    checkpoint_builder b = good(t);
    b.add_random("model.layers.1.mlp.up_proj.weight", tg::dtype::bfloat16, {96, 63}, 3);
    b.write();
    refused(b.dir(), {(b.dir() / "model.safetensors").string(), "tensor 'model.layers.1.mlp.up_proj.weight': shape [96, 63], expected [96, 64]"});
  }
  {
    temp_dir t;
    checkpoint_builder b = good(t);
    b.add("model.norm.weight", tg::st_dtype::i64, {64}, std::vector<std::byte>(512));
    b.write();
    refused(b.dir(), {"tensor 'model.norm.weight': dtype I64"});
  }
  {
    temp_dir t;
    checkpoint_builder b = good(t);
    b.remove("model.layers.0.self_attn.o_proj.weight");
    b.write(30000);
    refused(b.dir(), {(b.dir() / "model.safetensors.index.json").string(), "missing tensor 'model.layers.0.self_attn.o_proj.weight'"});
  }
  {
    temp_dir t;
    checkpoint_builder b = good(t, wrapper::multimodal);
    b.add_random("model.language_model_extra.x", tg::dtype::bfloat16, {2}, 4);
    b.write();
    refused(b.dir(), {(b.dir() / "model.safetensors").string(), "tensor 'model.language_model_extra.x': not part of a gemma4 checkpoint"});
  }
}

BOOST_AUTO_TEST_CASE(an_index_naming_a_missing_shard_is_refused_naming_the_index_and_the_shard) {
  temp_dir t;
  checkpoint_builder b = good(t);
  b.write(30000);
  const fs::path index = b.dir() / "model.safetensors.index.json";
  auto j = nlohmann::json::parse(read_raw(index));
  j["weight_map"]["model.norm.weight"] = "model-9-of-9.safetensors";
  write_raw(index, j.dump());
  refused(b.dir(), {index.string(), "shard 'model-9-of-9.safetensors'", "does not exist"});
  j["weight_map"]["model.norm.weight"] = "../model-1-of-9.safetensors";
  write_raw(index, j.dump());
  refused(b.dir(), {index.string(), "is a path, not a file name"});
}

BOOST_AUTO_TEST_CASE(a_bad_config_is_refused_naming_the_file_and_the_key) {
  temp_dir t;
  checkpoint_builder b = good(t);
  b.write();
  b.set_config(R"({"model_type": "gemma3_text"})");
  refused(b.dir(), {(b.dir() / "config.json").string(), "model_type: unsupported model type \"gemma3_text\""});
  auto j = nlohmann::json::parse(preset_config("tiny-all"));
  j["num_key_value_heads"] = 3;
  b.set_config(j.dump());
  refused(b.dir(), {(b.dir() / "config.json").string(), "num_key_value_heads"});
}

BOOST_AUTO_TEST_CASE(convert_saves_a_checkpoint_that_inspect_accepts) {
  temp_dir t;
  checkpoint_builder b = good(t, wrapper::unified);
  b.add_random("model.embed_vision.patch_embedder.dense.weight", tg::dtype::bfloat16, {8, 8}, 3);
  b.write();
  const fs::path out = t.path() / "converted";
  const cli_result r = cli({"convert", "--model", b.dir().string(), "--out", out.string(), "--dtype", "float32",
                            "--max-shard-size", "100kB"});
  BOOST_TEST(r.code == 0, r.err);
  BOOST_TEST(r.out.find("skipped 1 non-text tensors (128 B): model.embed_vision. 1 (128 B)") != std::string::npos, r.out);
  BOOST_TEST(fs::exists(out / "model.safetensors.index.json"));
  const cli_result again = cli({"inspect", "--model", out.string(), "--json"});
  BOOST_TEST(again.code == 0, again.err);
  BOOST_TEST(nlohmann::json::parse(again.out)["text_tensors"][0]["dtype"] == "F32");
  BOOST_TEST(cli({"convert", "--model", b.dir().string(), "--out", out.string()}).code == 1);  // exists
  BOOST_TEST(cli({"convert", "--model", b.dir().string(), "--out", out.string(), "--replace"}).code == 0);
  BOOST_TEST(cli({"convert", "--model", b.dir().string(), "--out", out.string(), "--dtype", "int8"}).code == 2);
  BOOST_TEST(cli({"convert", "--model", b.dir().string(), "--out", out.string(), "--max-shard-size", "lots"}).code == 2);
}

BOOST_AUTO_TEST_SUITE_END()
