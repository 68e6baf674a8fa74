// The CPU forward against Hugging Face transformers (gpu/model/forward.h): every committed fixture
// of tests/data/reference/ (tiny random checkpoints saved by transformers, with logprobs, loss and
// greedy continuations computed by it in float64; tools/reference/make_fixtures.py), with its
// config in both forms (flat keys and per_layer_config), all sequences packed into one batch.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gpu/core/host_buffer.h"
#include "gpu/model/checkpoint.h"
#include "gpu/model/forward.h"
#include "support/reference_fixtures.h"
#include "support/temp_dir.h"

#include "gpu/core/exec_context.h"

namespace {
// Every op of this file runs on the CPU, on the calling thread.
const tandem::gpu::exec_context ctx = tandem::gpu::exec_context::cpu();
}  // namespace

namespace fs = std::filesystem;
namespace tg = tandem::gpu;
using tandem::test::temp_dir;

namespace {

const fs::path fixtures = fs::path(TANDEM_SOURCE_DIR) / "tests/data/reference";

std::vector<fs::path> cases() {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(fixtures))
    if (fs::is_regular_file(e.path() / "reference.json")) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

nlohmann::json read_json(const fs::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

// A model opened and bound, its weights kept alive.
struct model {
  tg::checkpoint c;
  tg::slab s;
  tg::model_weights w;
};

model open_model(const fs::path& dir) {
  auto c = tg::open_checkpoint(dir, tg::dtype::float32);
  BOOST_REQUIRE_MESSAGE(c.has_value(), (c.has_value() ? "" : c.error().message()));
  auto s = tg::load_checkpoint(*c, tg::device::cpu());
  BOOST_REQUIRE_MESSAGE(s.has_value(), (s.has_value() ? "" : s.error().message()));
  auto w = tg::bind_weights(c->config, c->layout, *s);
  BOOST_REQUIRE_MESSAGE(w.has_value(), (w.has_value() ? "" : w.error().message()));
  return {std::move(*c), std::move(*s), std::move(*w)};
}

// The logprob of every next token of every sequence, all sequences in one packed batch.
std::vector<std::vector<float>> logprobs(const model& m, const std::vector<std::vector<std::int32_t>>& seqs,
                                         const tg::ops::sampling_params& params) {
  std::vector<std::int32_t> tokens, cu{0};
  for (const auto& s : seqs) {
    tokens.insert(tokens.end(), s.begin(), s.end());
    cu.push_back(static_cast<std::int32_t>(tokens.size()));
  }
  const tg::packed_tokens packed = *tg::pack_tokens(ctx, tokens, cu);
  const auto T = static_cast<std::int64_t>(tokens.size());
  tg::host_buffer out(tg::dtype::float32, {T});
  const tg::status st = tg::forward_logprobs(ctx, m.c.config, m.w, packed.view(), packed.targets, params, out, 7);
  BOOST_REQUIRE_MESSAGE(st.is_ok(), st.message());
  std::vector<std::vector<float>> result;
  for (std::size_t s = 0; s + 1 < cu.size(); ++s)
    result.emplace_back(out.data<float>() + cu[s], out.data<float>() + std::max(cu[s], cu[s + 1] - 1));
  return result;
}

// The greedy continuation of `seq` by `steps` tokens (a full forward per step).
std::vector<std::int32_t> greedy(const model& m, std::vector<std::int32_t> seq, int steps) {
  std::vector<std::int32_t> produced;
  for (int i = 0; i < steps; ++i) {
    const auto T = static_cast<std::int64_t>(seq.size());
    std::vector<std::int32_t> positions(seq.size());
    for (std::size_t t = 0; t < seq.size(); ++t) positions[t] = static_cast<std::int32_t>(t);
    auto ids = tg::host_buffer::of<std::int32_t>({T}, seq);
    auto pos = tg::host_buffer::of<std::int32_t>({T}, positions);
    auto offsets = tg::host_buffer::of<std::int32_t>({2}, {0, static_cast<std::int32_t>(T)});
    tg::host_buffer hidden(tg::dtype::float32, {T, m.c.config.hidden_size});
    BOOST_REQUIRE(tg::forward_hidden(ctx, m.c.config, m.w, {ids, pos, offsets}, hidden).is_ok());
    tg::host_buffer logits(tg::dtype::float32, {1, m.c.config.vocab_size});
    BOOST_REQUIRE(tg::head_logits(ctx, m.c.config, m.w, hidden.view().rows(T - 1, T), logits).is_ok());
    const float* row = logits.data<float>();
    const auto best = static_cast<std::int32_t>(std::max_element(row, row + m.c.config.vocab_size) - row);
    produced.push_back(best);
    seq.push_back(best);
  }
  return produced;
}

void check_case(const fs::path& dir, const fs::path& checkpoint, const std::string& form) {
  const nlohmann::json ref = read_json(dir / "reference.json");
  const auto seqs = ref.at("sequences").get<std::vector<std::vector<std::int32_t>>>();
  const model m = open_model(checkpoint);
  const std::string label = dir.filename().string() + " (" + form + ")";

  double worst = 0, nll = 0;
  std::int64_t count = 0;
  const auto got = logprobs(m, seqs, {});
  for (std::size_t s = 0; s < seqs.size(); ++s) {
    const auto want = ref.at("logprobs").at(s).get<std::vector<double>>();
    BOOST_REQUIRE_EQUAL(got[s].size(), want.size());
    for (std::size_t t = 0; t < want.size(); ++t) {
      worst = std::max(worst, std::abs(static_cast<double>(got[s][t]) - want[t]));
      nll -= got[s][t];
      ++count;
    }
  }
  BOOST_TEST(worst < 1e-4, label << ": max |logprob - transformers| = " << worst);
  BOOST_TEST(count == ref.at("tokens").get<std::int64_t>(), label);
  BOOST_TEST(std::abs(nll / static_cast<double>(count) - ref.at("loss").get<double>()) < 1e-5,
             label << ": loss " << nll / static_cast<double>(count) << " vs " << ref.at("loss").get<double>());

  double worst_masked = 0;
  const auto filtered = logprobs(m, seqs, {0.7, 8, 0.9});
  for (std::size_t s = 0; s < seqs.size(); ++s) {
    const auto& want = ref.at("logprobs_t07_k8_p09").at(s);
    for (std::size_t t = 0; t < want.size(); ++t) {
      if (want[t].is_null()) {
        BOOST_TEST(std::isinf(filtered[s][t]), label << ": sequence " << s << " token " << t << " should be masked out");
      } else {
        worst_masked = std::max(worst_masked, std::abs(static_cast<double>(filtered[s][t]) - want[t].get<double>()));
      }
    }
  }
  BOOST_TEST(worst_masked < 1e-4, label << ": max |logprob - transformers| at T 0.7, top-k 8, top-p 0.9 = " << worst_masked);
  BOOST_TEST_MESSAGE(label << ": max |Δ logprob| " << worst << ", filtered " << worst_masked << ", |Δ loss| "
                           << std::abs(nll / static_cast<double>(count) - ref.at("loss").get<double>()));

  const auto& continuations = ref.at("greedy");
  for (std::size_t s = 0; s < continuations.size(); ++s) {
    const auto want = continuations.at(s).get<std::vector<std::int32_t>>();
    BOOST_TEST(greedy(m, seqs.at(s), static_cast<int>(want.size())) == want, label << ": greedy continuation of sequence " << s);
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(forward_parity)

BOOST_AUTO_TEST_CASE(every_fixture_matches_transformers_in_both_config_forms) {
  const auto all = cases();
  BOOST_REQUIRE_MESSAGE(all.size() >= 7, "expected the 7 reference fixtures in " << fixtures);
  for (const fs::path& dir : all) {
    check_case(dir, dir, "config.json");
    // The same checkpoint with its config in the other form.
    temp_dir t;
    check_case(dir, tandem::test::with_alt_config(dir, t), "config.alt.json");
  }
}

BOOST_AUTO_TEST_SUITE_END()
