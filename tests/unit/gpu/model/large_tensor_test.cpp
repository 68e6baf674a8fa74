// A tensor of more than 2^31 elements (the size class of E2B's 2.35e9-element per-layer embedding
// table) goes through the whole checkpoint path: its header indexed with offsets past 4 GiB,
// loaded into a slab at its layout offset, written back, read again. The input is a sparse file
// and the writer leaves zero blocks as holes, so the test costs no disk (it does hold one
// 4.3 GB slab in memory).
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpu/model/checkpoint.h"
#include "gpu/model/checkpoint_writer.h"
#include "gpu/model/slab_views.h"
#include "support/checkpoint_fixture.h"
#include "support/temp_dir.h"

namespace tg = tandem::gpu;
using tandem::test::temp_dir;

namespace {

// One layer, a per-layer input width of 129 and 2^24 PLE rows: the PLE table has
// 16777216 x 129 = 2,164,260,864 elements (> 2^31), 4.33 GB in bfloat16.
constexpr const char* config_json = R"({
  "architectures": ["Gemma4ForCausalLM"], "model_type": "gemma4_text", "vocab_size": 16,
  "hidden_size": 8, "num_hidden_layers": 1, "intermediate_size": 8, "num_attention_heads": 1,
  "num_key_value_heads": 1, "head_dim": 4, "global_head_dim": 8, "hidden_size_per_layer_input": 129,
  "vocab_size_per_layer_input": 16777216})";

constexpr std::int64_t rows = 16777216, width = 129, big = rows * width;
const std::string big_name = "model.embed_tokens_per_layer.weight";

// Elements of the big table given a non-zero value, around the 2^31 boundary and at both ends.
const std::vector<std::int64_t> marked{0, 1, (std::int64_t{1} << 31) - 1, std::int64_t{1} << 31,
                                       (std::int64_t{1} << 31) + 1, (std::int64_t{1} << 31) + (1 << 23), big - 2, big - 1};

std::uint16_t mark(std::int64_t element) { return static_cast<std::uint16_t>(0x3f80 + element % 97); }

void pwrite_all(int fd, const void* p, std::size_t n, std::int64_t at) {
  BOOST_REQUIRE(::pwrite(fd, p, n, at) == static_cast<ssize_t>(n));
}

// The bfloat16 at `element` of tensor `t` in `f`.
std::uint16_t element_of(const tg::st_file& f, const tg::st_tensor& t, std::int64_t element) {
  std::uint16_t v;
  std::memcpy(&v, f.data(t).data() + 2 * element, 2);
  return v;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(large_tensors)

BOOST_AUTO_TEST_CASE(a_tensor_of_more_than_two_to_the_31_elements_is_read_loaded_and_written_back) {
  static_assert(big > (std::int64_t{1} << 31));
  temp_dir t;
  const auto dir = t.path() / "big";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << config_json;
  const tg::model_config config = *tg::load_model_config(dir);
  const tg::model_layout layout = tg::build_layout(config, tg::dtype::bfloat16);

  // The sparse input: the header, every small tensor filled, the big one zero but for `marked`.
  std::vector<tg::st_tensor> tensors;
  std::int64_t offset = 0;
  for (const tg::tensor_entry& e : layout.tensors) {
    tensors.push_back({tg::hf_full_name(config, e), tg::st_dtype::bf16, e.shape, offset, offset + e.bytes()});
    offset += e.bytes();
  }
  const std::string header = tg::st_serialize_header(tensors, {{"format", "pt"}});
  const int fd = ::open((dir / "model.safetensors").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  BOOST_REQUIRE(fd >= 0);
  pwrite_all(fd, header.data(), header.size(), 0);
  const std::int64_t data = static_cast<std::int64_t>(header.size());
  BOOST_REQUIRE(::ftruncate(fd, data + offset) == 0);
  for (const tg::st_tensor& s : tensors) {
    if (s.name == big_name) {
      for (std::int64_t e : marked) {
        const std::uint16_t v = mark(e);
        pwrite_all(fd, &v, 2, data + s.begin + 2 * e);
      }
    } else {
      std::vector<std::uint16_t> values(static_cast<std::size_t>(s.bytes() / 2));
      for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<std::uint16_t>(0x3c00 + i);
      pwrite_all(fd, values.data(), values.size() * 2, data + s.begin);
    }
  }
  ::close(fd);

  // Indexed: offsets past 4 GiB, 64-bit element counts.
  auto file = tg::st_file::open(dir / "model.safetensors");
  BOOST_REQUIRE_MESSAGE(file.has_value(), (file.has_value() ? "" : file.error().message()));
  const tg::st_tensor* table = file->header().find(big_name);
  BOOST_REQUIRE(table);
  BOOST_TEST(table->elements() == big);
  BOOST_TEST(table->bytes() == 2 * big);
  BOOST_TEST(file->header().data_bytes > (std::int64_t{1} << 32));
  const tg::st_tensor* after = file->header().find("model.per_layer_model_projection.weight");
  BOOST_REQUIRE(after);
  BOOST_TEST(after->begin == table->end);
  BOOST_TEST(element_of(*file, *after, 0) == 0x3c00);

  // Loaded at its layout offset.
  auto c = tg::open_checkpoint(dir, tg::dtype::bfloat16);
  BOOST_REQUIRE_MESSAGE(c.has_value(), (c.has_value() ? "" : c.error().message()));
  auto weights = tg::load_checkpoint(*c, tg::device::cpu());
  BOOST_REQUIRE_MESSAGE(weights.has_value(), (weights.has_value() ? "" : weights.error().message()));
  const tg::tensor_entry* entry = c->layout.find("embed_tokens_per_layer.weight");
  BOOST_REQUIRE(entry);
  const auto* loaded = static_cast<const std::uint16_t*>(tg::view_in(*weights, *entry, tg::dtype::bfloat16)->data());
  for (std::int64_t e : marked) BOOST_TEST(loaded[e] == mark(e), "element " << e);
  BOOST_TEST(loaded[big / 2 + 12345] == 0);
  const tg::tensor_entry* projection = c->layout.find("per_layer_model_projection.weight");
  BOOST_TEST(static_cast<const std::uint16_t*>(tg::view_in(*weights, *projection, tg::dtype::bfloat16)->data())[1] == 0x3c01);

  // Written back, sparse, and equal to the slab element for element.
  auto saved = tg::save_checkpoint(*c, *weights, t.path() / "out");
  BOOST_REQUIRE_MESSAGE(saved.has_value(), (saved.has_value() ? "" : saved.error().message()));
  auto out = tg::st_file::open(t.path() / "out" / "model.safetensors");
  BOOST_REQUIRE_MESSAGE(out.has_value(), (out.has_value() ? "" : out.error().message()));
  const tg::st_tensor* written = out->header().find(big_name);
  BOOST_REQUIRE(written);
  BOOST_TEST(written->elements() == big);
  for (std::int64_t e : marked) BOOST_TEST(element_of(*out, *written, e) == mark(e), "element " << e);
  // Compared through read(), so the comparison does not map the whole file into this process.
  const int in = ::open((t.path() / "out" / "model.safetensors").c_str(), O_RDONLY);
  BOOST_REQUIRE(in >= 0);
  std::vector<std::byte> chunk(std::size_t{64} << 20);
  const std::byte* want = reinterpret_cast<const std::byte*>(loaded);
  std::int64_t mismatches = 0;
  for (std::int64_t at = 0; at < 2 * big; at += static_cast<std::int64_t>(chunk.size())) {
    const auto n = static_cast<std::size_t>(std::min<std::int64_t>(static_cast<std::int64_t>(chunk.size()), 2 * big - at));
    BOOST_REQUIRE(::pread(in, chunk.data(), n, out->header().data_begin + written->begin + at) == static_cast<ssize_t>(n));
    mismatches += std::memcmp(chunk.data(), want + at, n) != 0;
  }
  ::close(in);
  BOOST_TEST(mismatches == 0);
  struct ::stat st {};
  BOOST_REQUIRE(::stat((t.path() / "out" / "model.safetensors").c_str(), &st) == 0);
  BOOST_TEST(st.st_size == out->file_bytes());
  BOOST_TEST(st.st_blocks * 512 < (std::int64_t{64} << 20), "the zero blocks were written out: " << st.st_blocks * 512 << " bytes on disk");
}

BOOST_AUTO_TEST_SUITE_END()
