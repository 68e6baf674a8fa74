// Saving drop-in Hugging Face checkpoints (gpu/model/checkpoint_writer.h): bit-identical round
// trips, non-text tensors and side files carried through, shards with an index, and a save that
// fails or is killed leaving nothing that looks complete.
#include <boost/test/unit_test.hpp>

#include <csignal>
#include <cstring>
#include <fstream>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

#include "gpu/model/checkpoint.h"
#include "gpu/model/checkpoint_files.h"
#include "gpu/model/checkpoint_writer.h"
#include "gpu/model/slab_views.h"
#include "support/checkpoint_fixture.h"
#include "support/temp_dir.h"

namespace tg = tandem::gpu;
namespace fs = std::filesystem;
using tandem::test::checkpoint_builder;
using tandem::test::preset_config;
using tandem::test::temp_dir;
using tandem::test::wrapper;

namespace {

tg::checkpoint open_ok(const fs::path& dir, tg::dtype type) {
  auto c = tg::open_checkpoint(dir, type);
  BOOST_REQUIRE_MESSAGE(c.has_value(), (c.has_value() ? "" : c.error().message()));
  return std::move(*c);
}

tg::slab load_ok(const tg::checkpoint& c) {
  auto s = tg::load_checkpoint(c, tg::device::cpu());
  BOOST_REQUIRE_MESSAGE(s.has_value(), (s.has_value() ? "" : s.error().message()));
  return std::move(*s);
}

tg::save_report save_ok(const tg::checkpoint& c, const tg::slab& s, const fs::path& out, const tg::save_options& o) {
  auto r = tg::save_checkpoint(c, s, out, o);
  BOOST_REQUIRE_MESSAGE(r.has_value(), (r.has_value() ? "" : r.error().message()));
  return std::move(*r);
}

checkpoint_builder source(const temp_dir& t, const std::string& preset, tg::dtype type, wrapper w) {
  checkpoint_builder b(t.path() / "source");
  const std::string config = preset_config(preset, w);
  b.set_config(config);
  b.write_file("generation_config.json", R"({"bos_token_id": 2, "eos_token_id": [1, 106]})");
  b.write_file("tokenizer_config.json", R"({"model_max_length": 1000})");
  b.add_text_stack(*tg::parse_model_config(config, "config.json"), type);
  return b;
}

std::string file_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Every tensor of the directory `dir`, name -> (dtype, shape, bytes), read back through st_file.
std::map<std::string, checkpoint_builder::tensor> read_back(const fs::path& dir) {
  auto files = tg::checkpoint_files::open(dir);
  BOOST_REQUIRE_MESSAGE(files.has_value(), (files.has_value() ? "" : files.error().message()));
  std::map<std::string, checkpoint_builder::tensor> out;
  for (const auto& e : files->tensors()) {
    auto bytes = files->file_of(e).data(*e.tensor);
    out[e.tensor->name] = {e.tensor->type, e.tensor->shape, {bytes.begin(), bytes.end()}};
  }
  return out;
}

void check_same_tensors(const std::map<std::string, checkpoint_builder::tensor>& got, checkpoint_builder& want) {
  BOOST_TEST(got.size() == want.tensors().size());
  for (const auto& [name, t] : want.tensors()) {
    auto it = got.find(name);
    BOOST_REQUIRE_MESSAGE(it != got.end(), name << " missing from the save");
    BOOST_TEST((it->second.type == t.type), name);
    BOOST_TEST(it->second.shape == t.shape, name);
    BOOST_TEST((it->second.data == t.data), name << " differs");
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(checkpoint_writer)

BOOST_AUTO_TEST_CASE(a_float32_checkpoint_round_trips_bit_for_bit_through_a_float32_slab) {
  temp_dir t;
  checkpoint_builder b = source(t, "tiny-all", tg::dtype::float32, wrapper::text_only);
  b.write();
  const tg::checkpoint c = open_ok(b.dir(), tg::dtype::float32);
  const tg::slab s = load_ok(c);
  const tg::save_report r = save_ok(c, s, t.path() / "out", {tg::dtype::float32, 5'000'000'000, false, {}, {}});
  BOOST_TEST(r.shards == std::vector<std::string>{"model.safetensors"});
  BOOST_TEST(r.text_tensors == static_cast<std::int64_t>(c.layout.tensors.size()));
  check_same_tensors(read_back(t.path() / "out"), b);
  for (const char* side : {"config.json", "generation_config.json", "tokenizer_config.json"})
    BOOST_TEST(file_text(t.path() / "out" / side) == file_text(b.dir() / side), side);
  BOOST_TEST(!fs::exists(t.path() / "out" / "model.safetensors.index.json"));
}

BOOST_AUTO_TEST_CASE(a_bfloat16_checkpoint_round_trips_bit_for_bit_through_a_float32_slab) {
  temp_dir t;
  checkpoint_builder b = source(t, "tiny-e", tg::dtype::bfloat16, wrapper::text_only);
  b.write();
  const tg::checkpoint c = open_ok(b.dir(), tg::dtype::float32);
  const tg::slab s = load_ok(c);
  save_ok(c, s, t.path() / "out", {});  // bfloat16 by default
  check_same_tensors(read_back(t.path() / "out"), b);
  // And the saved directory opens and loads again to the same slab.
  const tg::checkpoint again = open_ok(t.path() / "out", tg::dtype::float32);
  const tg::slab s2 = load_ok(again);
  BOOST_TEST(std::memcmp(tg::view_in(s, c.layout.tensors[0], tg::dtype::float32)->data(),
                         tg::view_in(s2, again.layout.tensors[0], tg::dtype::float32)->data(), s.bytes()) == 0);
}

BOOST_AUTO_TEST_CASE(a_multimodal_save_carries_non_text_and_unused_kv_tensors_byte_for_byte_in_shards) {
  temp_dir t;
  checkpoint_builder b = source(t, "tiny-e", tg::dtype::bfloat16, wrapper::multimodal);
  b.add_random("model.vision_tower.encoder.layers.0.mlp.fc1.weight", tg::dtype::float32, {16, 8}, 5);
  b.add("model.vision_tower.std_bias", tg::st_dtype::u8, {5}, std::vector<std::byte>{std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4}, std::byte{5}});
  b.add_random("model.embed_audio.embedding_projection.weight", tg::dtype::float16, {64, 3}, 6);
  const auto config = *tg::parse_model_config(preset_config("tiny-e", wrapper::multimodal), "config.json");
  for (int l = config.first_kv_shared_layer(); l < config.num_hidden_layers; ++l)
    b.add_random("model.language_model.layers." + std::to_string(l) + ".self_attn.k_proj.weight", tg::dtype::bfloat16, {32, 64}, 50 + l);
  b.write(40000);
  std::ofstream(b.dir() / "pytorch_model.bin") << "stale weights of another format";
  const tg::checkpoint c = open_ok(b.dir(), tg::dtype::float32);
  const tg::slab s = load_ok(c);
  const tg::save_report r = save_ok(c, s, t.path() / "out", {tg::dtype::bfloat16, 30000, false, {}, {}});
  BOOST_TEST(r.shards.size() > 1);
  BOOST_TEST(r.carried_tensors == 3 + (config.num_hidden_layers - config.first_kv_shared_layer()));
  BOOST_TEST(!fs::exists(t.path() / "out" / "pytorch_model.bin"));
  BOOST_TEST(!fs::exists(t.path() / "out" / "model.safetensors"));
  check_same_tensors(read_back(t.path() / "out"), b);  // checkpoint_files checks the index against the shards
  for (const std::string& shard : r.shards) {
    auto f = tg::st_file::open(t.path() / "out" / shard);
    BOOST_REQUIRE(f.has_value());
    BOOST_TEST((f->header().metadata == std::map<std::string, std::string>{{"format", "pt"}}));
    if (f->header().tensors.size() > 1) BOOST_TEST(f->header().data_bytes <= 30000, shard);
  }
}

BOOST_AUTO_TEST_CASE(a_float32_slab_saves_to_bfloat16_rounded_to_nearest_even) {
  temp_dir t;
  checkpoint_builder b = source(t, "tiny-dense", tg::dtype::float32, wrapper::text_only);
  const std::vector<float> values{1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 1.0f + 0x1p-8f + 0x1p-20f, 3.0e38f};
  std::memcpy(b.tensors().at("model.norm.weight").data.data(), values.data(), 16);
  b.write();
  const tg::checkpoint c = open_ok(b.dir(), tg::dtype::float32);
  save_ok(c, load_ok(c), t.path() / "out", {});
  const auto got = read_back(t.path() / "out").at("model.norm.weight");
  BOOST_TEST((got.type == tg::st_dtype::bf16));
  std::uint16_t bits[4];
  std::memcpy(bits, got.data.data(), 8);
  BOOST_TEST(bits[0] == 0x3f80);
  BOOST_TEST(bits[1] == 0x3f82);
  BOOST_TEST(bits[2] == 0x3f81);
  BOOST_TEST(bits[3] == 0x7f62);
}

BOOST_AUTO_TEST_CASE(an_existing_directory_is_refused_unless_replaced_and_then_swapped_whole) {
  temp_dir t;
  checkpoint_builder b = source(t, "tiny-dense", tg::dtype::bfloat16, wrapper::text_only);
  b.write();
  const tg::checkpoint c = open_ok(b.dir(), tg::dtype::float32);
  const tg::slab s = load_ok(c);
  fs::create_directories(t.path() / "out");
  std::ofstream(t.path() / "out" / "old-file") << "x";
  auto refused = tg::save_checkpoint(c, s, t.path() / "out", {});
  BOOST_REQUIRE(!refused.has_value());
  BOOST_TEST(refused.error().message() == (t.path() / "out").string() + ": already exists (replace it explicitly)");
  tg::save_options o;
  o.replace = true;
  save_ok(c, s, t.path() / "out", o);
  BOOST_TEST(!fs::exists(t.path() / "out" / "old-file"));
  check_same_tensors(read_back(t.path() / "out"), b);
  for (const auto& e : fs::directory_iterator(t.path())) BOOST_TEST(!e.path().filename().string().starts_with("."), e.path());
}

BOOST_AUTO_TEST_CASE(a_save_that_fails_half_way_leaves_no_directory_behind) {
  temp_dir t;
  checkpoint_builder b = source(t, "tiny-all", tg::dtype::bfloat16, wrapper::text_only);
  b.write();
  const tg::checkpoint c = open_ok(b.dir(), tg::dtype::float32);
  const tg::slab s = load_ok(c);
  tg::save_options o;
  o.max_shard_bytes = 20000;
  int files = 0;
  o.on_file = [&](const std::string&) {
    return ++files == 2 ? tg::status(tg::status_code::io_error, "injected failure") : tg::status::ok();
  };
  auto r = tg::save_checkpoint(c, s, t.path() / "out", o);
  BOOST_REQUIRE(!r.has_value());
  BOOST_TEST(r.error().message() == "injected failure");
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(t.path())) left.push_back(e.path().filename().string());
  BOOST_TEST(left == std::vector<std::string>{"source"});
}

BOOST_AUTO_TEST_CASE(a_save_killed_half_way_leaves_only_a_hidden_partial_directory) {
  temp_dir t;
  checkpoint_builder b = source(t, "tiny-all", tg::dtype::bfloat16, wrapper::text_only);
  b.write();
  const tg::checkpoint c = open_ok(b.dir(), tg::dtype::float32);
  const tg::slab s = load_ok(c);
  const pid_t child = ::fork();
  if (child == 0) {
    tg::save_options o;
    o.max_shard_bytes = 20000;
    int files = 0;
    o.on_file = [&](const std::string&) {
      if (++files == 3) ::raise(SIGKILL);
      return tg::status::ok();
    };
    (void)tg::save_checkpoint(c, s, t.path() / "out", o);
    ::_exit(0);
  }
  int wstatus = 0;
  ::waitpid(child, &wstatus, 0);
  BOOST_TEST(WIFSIGNALED(wstatus));
  BOOST_TEST(!fs::exists(t.path() / "out"));
  int partial = 0;
  for (const auto& e : fs::directory_iterator(t.path())) {
    const std::string n = e.path().filename().string();
    if (n == "source") continue;
    BOOST_TEST(n.starts_with(".out.partial-"), n);
    ++partial;
  }
  BOOST_TEST(partial == 1);
}

BOOST_AUTO_TEST_CASE(a_config_only_directory_saves_the_layout_under_hugging_face_names) {
  temp_dir t;
  checkpoint_builder b(t.path() / "source");
  b.set_config(preset_config("tiny-dense", wrapper::multimodal));
  const tg::checkpoint c = open_ok(b.dir(), tg::dtype::float32);
  BOOST_TEST(!c.files.has_value());
  auto s = tg::slab::create("parameters", c.layout.total_bytes(), tg::device::cpu());
  BOOST_REQUIRE(s.has_value());
  save_ok(c, *s, t.path() / "out", {});
  const tg::checkpoint again = open_ok(t.path() / "out", tg::dtype::float32);
  BOOST_TEST(again.report.text_tensors == static_cast<std::int64_t>(c.layout.tensors.size()));
  BOOST_TEST(read_back(t.path() / "out").count("model.language_model.embed_tokens.weight") == 1);
}

BOOST_AUTO_TEST_SUITE_END()
