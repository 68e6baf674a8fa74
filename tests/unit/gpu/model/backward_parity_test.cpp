// The CPU backward against Hugging Face transformers (gpu/model/backward.h): on every committed
// fixture of tests/data/reference/, the gradient of the mean next-token cross-entropy over all
// sequences (packed into one batch) for every trainable tensor, in every recompute mode, within
// 1e-4 of the fixture's float64 gradient relative to its largest element. layer_scalar is a buffer
// in transformers (never trained) and has no reference gradient; backward_test.cpp checks ours
// by finite differences.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unistd.h>
#include <set>

#include "gpu/core/host_buffer.h"
#include "gpu/model/backward.h"
#include "gpu/model/checkpoint.h"
#include "gpu/model/safetensors_file.h"
#include "gpu/model/slab_views.h"
#include "support/reference_fixtures.h"

#include "gpu/core/exec_context.h"

namespace {
// Every op of this file runs on the CPU, on the calling thread.
const tandem::gpu::exec_context ctx = tandem::gpu::exec_context::cpu();
}  // namespace

namespace fs = std::filesystem;
namespace tg = tandem::gpu;

namespace {

const fs::path fixtures = fs::path(TANDEM_SOURCE_DIR) / "tests/data/reference";

struct gradients_of_case {
  tg::checkpoint c;
  tg::slab grads;
  std::map<std::string, std::size_t> layout_of;  // checkpoint name -> layout index
};

// Our gradient of the fixture's loss in `mode`.
gradients_of_case run(const fs::path& dir, tg::recompute_mode mode) {
  auto c = tg::open_checkpoint(dir, tg::dtype::float32);
  BOOST_REQUIRE_MESSAGE(c.has_value(), (c.has_value() ? "" : c.error().message()));
  auto weights = tg::load_checkpoint(*c, tg::device::cpu());
  auto grads = tg::slab::create("gradients", c->layout.total_bytes(), tg::device::cpu());
  BOOST_REQUIRE(weights.has_value() && grads.has_value());
  const auto w = *tg::bind_weights(c->config, c->layout, *weights);
  const auto g = *tg::bind_weights(c->config, c->layout, *grads);

  std::ifstream in(dir / "reference.json");
  const auto seqs = nlohmann::json::parse(in).at("sequences").get<std::vector<std::vector<std::int32_t>>>();
  std::vector<std::int32_t> tokens, cu{0};
  std::vector<float> dlp;
  std::int64_t predicted = 0;
  for (const auto& s : seqs) predicted += std::max<std::int64_t>(0, static_cast<std::int64_t>(s.size()) - 1);
  for (const auto& s : seqs) {
    tokens.insert(tokens.end(), s.begin(), s.end());
    for (std::size_t t = 0; t < s.size(); ++t) dlp.push_back(t + 1 < s.size() ? -1.0f / static_cast<float>(predicted) : 0.0f);
    cu.push_back(static_cast<std::int32_t>(tokens.size()));
  }
  const auto T = static_cast<std::int64_t>(tokens.size());
  const tg::packed_tokens packed = *tg::pack_tokens(ctx, tokens, cu);
  const auto d = tg::host_buffer::of<float>({T}, dlp);
  const tg::packed_batch batch = packed.view();
  const tg::device_buffer& tgt = packed.targets;
  tg::model_activations act;
  tg::host_buffer hidden(tg::dtype::float32, {T, c->config.hidden_size}), d_hidden(tg::dtype::float32, {T, c->config.hidden_size});
  BOOST_REQUIRE(tg::forward_for_backward(ctx, c->config, w, batch, hidden, act, mode).is_ok());
  BOOST_REQUIRE(tg::head_backward(ctx, c->config, w, hidden, tgt, {}, d, d_hidden, g, 32).is_ok());
  const tg::status s = tg::model_backward(ctx, c->config, w, batch, act, d_hidden, g);
  BOOST_REQUIRE_MESSAGE(s.is_ok(), s.message());
  gradients_of_case out{std::move(*c), std::move(*grads), {}};
  for (const auto& p : out.c.plan.tensors)
    if (p.role == tg::tensor_role::text) out.layout_of[p.name] = p.layout_index;
  return out;
}

// max |ours - reference| / max |reference| over the tensors of `file`, every one of which must
// be a layout tensor; `seen` collects their names.
double worst_relative(const gradients_of_case& ours, const fs::path& file, std::set<std::string>& seen, std::string& where) {
  auto f = tg::st_file::open(file);
  BOOST_REQUIRE_MESSAGE(f.has_value(), (f.has_value() ? "" : f.error().message()));
  double worst = 0;
  for (const tg::st_tensor& t : f->header().tensors) {
    const auto it = ours.layout_of.find(t.name);
    BOOST_REQUIRE_MESSAGE(it != ours.layout_of.end(), file << ": " << t.name << " is not a tensor of the model");
    const tg::tensor_entry& e = ours.c.layout.tensors[it->second];
    BOOST_REQUIRE(t.type == tg::st_dtype::f32 && t.elements() == e.elements());
    const float* mine = static_cast<const float*>(tg::view_in(ours.grads, e, tg::dtype::float32)->data());
    std::vector<float> ref(static_cast<std::size_t>(t.elements()));
    std::memcpy(ref.data(), f->data(t).data(), ref.size() * 4);
    double largest = 0, diff = 0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
      largest = std::max(largest, std::abs(static_cast<double>(ref[i])));
      diff = std::max(diff, std::abs(static_cast<double>(mine[i]) - ref[i]));
    }
    const double rel = largest > 0 ? diff / largest : diff;
    if (rel > worst) {
      worst = rel;
      where = t.name;
    }
    seen.insert(t.name);
  }
  return worst;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(backward_parity)

BOOST_AUTO_TEST_CASE(every_gradient_of_every_fixture_matches_transformers_in_every_recompute_mode) {
  int cases = 0;
  for (const auto& entry : fs::directory_iterator(fixtures)) {
    const fs::path dir = entry.path();
    if (!fs::is_regular_file(dir / "gradients.safetensors")) continue;
    ++cases;
    // The same checkpoint with its config in the other form (flat keys / per_layer_config).
    const tandem::test::temp_dir scratch;
    const fs::path alt = tandem::test::with_alt_config(dir, scratch);
    for (const auto& [checkpoint, mode] : std::vector<std::pair<fs::path, tg::recompute_mode>>{
             {dir, tg::recompute_mode::none}, {dir, tg::recompute_mode::selective}, {dir, tg::recompute_mode::full},
             {alt, tg::recompute_mode::none}}) {
      const gradients_of_case ours = run(checkpoint, mode);
      std::set<std::string> seen;
      std::string where;
      const double worst = worst_relative(ours, dir / "gradients.safetensors", seen, where);
      const std::string label = dir.filename().string() + " (" + std::string(tg::to_string(mode)) +
                                (checkpoint == alt ? ", config.alt.json" : "") + ")";
      BOOST_TEST(worst < 1e-4, label << ": worst gradient " << where << ", " << worst << " of its largest element");
      std::size_t trainable = 0;
      for (const auto& e : ours.c.layout.tensors) trainable += e.trainable;
      BOOST_TEST(seen.size() == trainable, label << ": the fixture leaves out trainable tensors of the layout");
      BOOST_TEST_MESSAGE(label << ": worst relative gradient error " << worst << " (" << where << ")");
    }
  }
  BOOST_TEST(cases >= 7, "expected the 7 reference fixtures in " << fixtures);
}

BOOST_AUTO_TEST_SUITE_END()
