// The Gemma 4 train engine on cuda:0 against transformers and against the same engine on the CPU,
// in float32: every committed reference fixture scored (logprobs, also under temperature, top-k
// and top-p), a few RL steps of a tiny model tracking the CPU engine's losses and gradient norms,
// device memory that does not grow over a hundred steps, an offload that hands the device back
// all the training state it holds, and an NCCL group of one changing no bit. Prints the figures it checks.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "gpu/comm/nccl_group.h"
#include "gpu/core/device_buffer.h"
#include "gpu/core/memory.h"
#include "gpu/engine/gemma4_train_engine.h"
#include "support/checkpoint_fixture.h"
#include "support/micro_batches.h"
#include "support/reference_fixtures.h"
#include "support/temp_dir.h"

namespace fs = std::filesystem;
namespace tg = tandem::gpu;
using tandem::test::checkpoint_builder;
using tandem::test::preset_config;
using tandem::test::temp_dir;

namespace {

const tg::exec_context on_cuda{tg::device::cuda(0), {}, nullptr};

std::unique_ptr<tg::gemma4_train_engine> engine_on(const tg::exec_context& ctx, const fs::path& dir, tg::train_engine_options o = {}) {
  auto c = tg::open_checkpoint(dir, tg::dtype::float32);
  BOOST_REQUIRE_MESSAGE(c.has_value(), (c.has_value() ? "" : c.error().message()));
  auto e = tg::gemma4_train_engine::create(ctx, std::move(*c), o);
  BOOST_REQUIRE_MESSAGE(e.has_value(), (e.has_value() ? "" : e.error().message()));
  return std::move(*e);
}

fs::path tiny_model(const temp_dir& t) {
  checkpoint_builder b(t.path() / "tiny-all");
  const std::string config = preset_config("tiny-all");
  b.set_config(config);
  b.add_text_stack(*tg::parse_model_config(config, "config.json"), tg::dtype::float32, 33);
  b.write();
  return b.dir();
}

tg::packed_sequences packed(const std::vector<std::vector<std::int32_t>>& seqs) {
  tg::packed_sequences p;
  p.offsets.push_back(0);
  for (const auto& s : seqs) {
    p.tokens.insert(p.tokens.end(), s.begin(), s.end());
    p.offsets.push_back(static_cast<std::int32_t>(p.tokens.size()));
  }
  return p;
}


// max and mean |a - b| over the positions both score (token 0 of each sequence is 0 in both).
struct difference {
  double max = 0, mean = 0;
};
difference compare(const std::vector<float>& a, const std::vector<float>& b) {
  difference d;
  std::size_t n = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isinf(a[i]) || std::isinf(b[i])) {
      BOOST_TEST((a[i] == b[i]), "position " << i << ": " << a[i] << " vs " << b[i]);
      continue;
    }
    const double e = std::abs(static_cast<double>(a[i]) - b[i]);
    d.max = std::max(d.max, e);
    d.mean += e;
    ++n;
  }
  if (n) d.mean /= static_cast<double>(n);
  return d;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cuda_train_engine_parity)

BOOST_AUTO_TEST_CASE(every_fixture_scores_on_cuda_in_float32_as_transformers_and_the_cpu_engine_do) {
  std::vector<fs::path> fixtures;
  for (const auto& e : fs::directory_iterator(tandem::test::reference_fixtures))
    if (fs::is_regular_file(e.path() / "reference.json")) fixtures.push_back(e.path());
  std::sort(fixtures.begin(), fixtures.end());
  BOOST_REQUIRE_MESSAGE(fixtures.size() >= 7, "expected the 7 reference fixtures in " << tandem::test::reference_fixtures);
  for (const fs::path& dir : fixtures) {
    std::ifstream in(dir / "reference.json");
    const nlohmann::json ref = nlohmann::json::parse(in);
    const auto seqs = ref.at("sequences").get<std::vector<std::vector<std::int32_t>>>();
    const tg::packed_sequences batch = packed(seqs);
    auto cuda = engine_on(on_cuda, dir);
    auto cpu = engine_on(tg::exec_context::cpu(), dir);
    const std::string name = dir.filename().string();
    for (const auto& [params, key] : {std::pair{tg::ops::sampling_params{}, "logprobs"},
                                      std::pair{tg::ops::sampling_params{0.7, 8, 0.9}, "logprobs_t07_k8_p09"}}) {
      const auto got = cuda->logprobs(batch, params);
      BOOST_REQUIRE_MESSAGE(got.has_value(), name << ": " << (got.has_value() ? "" : got.error().message()));
      // transformers' values in the token frame: sequence s's value t scores token t + 1.
      std::vector<float> want(batch.tokens.size(), 0.0f);
      for (std::size_t s = 0; s < seqs.size(); ++s) {
        const auto& row = ref.at(key).at(s);
        for (std::size_t t = 0; t < row.size(); ++t)
          want[static_cast<std::size_t>(batch.offsets[s]) + t + 1] =
              row[t].is_null() ? -INFINITY : static_cast<float>(row[t].get<double>());
      }
      const difference vs_hf = compare(*got, want), vs_cpu = compare(*got, *cpu->logprobs(batch, params));
      BOOST_TEST_MESSAGE(name << " " << key << ": |Δ logprob| vs transformers mean " << vs_hf.mean << " max " << vs_hf.max
                              << "; vs the CPU engine mean " << vs_cpu.mean << " max " << vs_cpu.max);
      BOOST_TEST(vs_hf.max < 1e-4, name << " " << key << ": max |Δ logprob| vs transformers " << vs_hf.max);
      BOOST_TEST(vs_cpu.max < 1e-4, name << " " << key << ": max |Δ logprob| vs the CPU engine " << vs_cpu.max);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_few_rl_steps_on_cuda_track_the_cpu_engine) {
  temp_dir t;
  const fs::path dir = tiny_model(t);
  tg::train_engine_options o;
  o.adamw.lr = 1e-3;
  auto cuda = engine_on(on_cuda, dir, o), cpu = engine_on(tg::exec_context::cpu(), dir, o);
  BOOST_TEST(cuda->weights_digest() == cpu->weights_digest(), "both start from the same float32 weights");
  const tg::packed_sequences s = packed({{3, 17, 29, 4, 88, 61, 5, 19}, {9, 9, 200, 31, 7}, {1, 2, 3}});
  for (int step = 0; step < 4; ++step) {
    const float advantage = step % 2 ? -0.5f : 1.0f;
    // The same micro-batch for both: the CPU engine's lp_prev, so the ratios differ by the
    // engines' difference only.
    const auto mb = tandem::test::on_policy_micro_batch(*cpu, s, advantage);
    const auto a = cuda->train_step({mb}, {}, {13, 3}, {}), b = cpu->train_step({mb}, {}, {13, 3}, {});
    BOOST_REQUIRE_MESSAGE(a.has_value(), (a.has_value() ? "" : a.error().message()));
    BOOST_REQUIRE(b.has_value());
    const double loss_error = std::abs(a->metrics.pg_loss - b->metrics.pg_loss) / std::max(1e-12, std::abs(b->metrics.pg_loss));
    const double norm_error = std::abs(a->optimizer.grad_norm - b->optimizer.grad_norm) / b->optimizer.grad_norm;
    BOOST_TEST_MESSAGE("step " << step << ": loss " << a->metrics.pg_loss << " vs " << b->metrics.pg_loss << ", grad norm "
                               << a->optimizer.grad_norm << " vs " << b->optimizer.grad_norm);
    BOOST_TEST(loss_error < 1e-4, "step " << step << ": relative loss difference " << loss_error);
    BOOST_TEST(norm_error < 1e-4, "step " << step << ": relative gradient-norm difference " << norm_error);
  }
  const difference after = compare(*cuda->logprobs(s, {}), *cpu->logprobs(s, {}));
  BOOST_TEST_MESSAGE("after 4 steps: |Δ logprob| CUDA vs CPU mean " << after.mean << " max " << after.max);
  BOOST_TEST(after.max < 1e-3);
}

BOOST_AUTO_TEST_CASE(device_memory_does_not_grow_over_a_hundred_steps) {
  temp_dir t;
  auto e = engine_on(on_cuda, tiny_model(t));
  const tg::packed_sequences s = packed({{3, 17, 29, 4, 88, 61, 5, 19}, {9, 9, 200, 31, 7}});
  const tg::device dev = tg::device::cuda(0);
  std::int64_t peak_after_first = 0;
  const std::int64_t live = tg::device_buffer_live_bytes(dev);  // the engine holds none between calls
  for (int step = 0; step < 100; ++step) {
    BOOST_REQUIRE(e->train_step({tandem::test::on_policy_micro_batch(*e, s, step % 2 ? -1.0f : 1.0f)}, {}, {11, 2}, {}).has_value());
    BOOST_REQUIRE_MESSAGE(tg::device_buffer_live_bytes(dev) == live, "step " << step << ": "
                                                                          << tg::device_buffer_live_bytes(dev) - live
                                                                          << " bytes of activations outlived it");
    if (step == 0) {
      peak_after_first = tg::device_buffer_peak_bytes(dev);
      tg::reset_device_buffer_peak(dev);
    }
  }
  BOOST_TEST(tg::device_buffer_peak_bytes(dev) <= peak_after_first, "the activation peak grew after the first step");
  BOOST_TEST_MESSAGE("activation peak per step: " << peak_after_first << " bytes");
}

BOOST_AUTO_TEST_CASE(offloading_a_bfloat16_engine_hands_the_device_its_gradients_moments_and_float32_master) {
  temp_dir t;
  // tiny-all with a 65,536-token vocabulary: 7M parameters, so each slab is megabytes (the
  // device's count moves in pages).
  nlohmann::json config = nlohmann::json::parse(preset_config("tiny-all"));
  config["vocab_size"] = 65536;
  checkpoint_builder b(t.path() / "wide-vocab");
  b.set_config(config.dump());
  b.add_text_stack(*tg::parse_model_config(config.dump(), "config.json"), tg::dtype::float32, 5);
  b.write();
  auto c = tg::open_checkpoint(b.dir(), tg::dtype::bfloat16);
  BOOST_REQUIRE(c.has_value());
  auto e = tg::gemma4_train_engine::create(on_cuda, std::move(*c), {});  // float32 master and moments
  BOOST_REQUIRE_MESSAGE(e.has_value(), (e.has_value() ? "" : e.error().message()));
  auto& engine = **e;
  const tg::packed_sequences s = packed({{3, 17, 29, 4, 88, 61, 5, 19}, {9, 9, 200, 31, 7}});
  BOOST_REQUIRE(engine.train_step({tandem::test::on_policy_micro_batch(engine, s)}, {}, {11, 2}, {}).has_value());
  const auto memory = engine.memory();
  const std::int64_t training = *tg::device_memory_in_use(on_cuda.dev);
  BOOST_REQUIRE(engine.offload_state().is_ok());
  const std::int64_t offloaded = *tg::device_memory_in_use(on_cuda.dev);
  BOOST_TEST_MESSAGE("in use training " << training << ", offloaded " << offloaded << " bytes; gradients "
                                        << memory.gradients << ", optimizer state " << memory.optimizer);
  BOOST_TEST(training - offloaded >= memory.gradients + memory.optimizer,
             "the device got back " << training - offloaded << " of " << memory.gradients + memory.optimizer << " bytes");
  BOOST_REQUIRE(engine.restore_state().is_ok());
  BOOST_TEST(*tg::device_memory_in_use(on_cuda.dev) - offloaded >= memory.gradients + memory.optimizer);
}

BOOST_AUTO_TEST_CASE(an_engine_in_an_nccl_group_of_one_trains_bit_for_bit_as_one_without_a_group) {
  temp_dir t;
  const fs::path dir = tiny_model(t);
  const auto id = tg::nccl_group::make_id();
  BOOST_REQUIRE(id.has_value());
  auto group = tg::nccl_group::create(on_cuda, *id, 0, 1, 60);
  BOOST_REQUIRE_MESSAGE(group.has_value(), (group.has_value() ? "" : group.error().message()));
  auto c = tg::open_checkpoint(dir, tg::dtype::float32);
  BOOST_REQUIRE(c.has_value());
  auto grouped = tg::gemma4_train_engine::create(on_cuda, std::move(*c), {}, group->get());
  BOOST_REQUIRE_MESSAGE(grouped.has_value(), (grouped.has_value() ? "" : grouped.error().message()));
  auto alone = engine_on(on_cuda, dir);
  const tg::packed_sequences s = packed({{3, 17, 29, 4, 88, 61, 5, 19}, {9, 9, 200, 31, 7}});
  for (int step = 0; step < 3; ++step) {
    const auto mb = tandem::test::on_policy_micro_batch(*alone, s);
    BOOST_REQUIRE((*grouped)->train_step({mb}, {}, {11, 2}, {}).has_value());
    BOOST_REQUIRE(alone->train_step({mb}, {}, {11, 2}, {}).has_value());
  }
  BOOST_TEST((*grouped)->weights_digest() == alone->weights_digest());
}

BOOST_AUTO_TEST_SUITE_END()
