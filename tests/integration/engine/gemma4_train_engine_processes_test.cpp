// Data-parallel training across processes: two forked ranks, each a CPU train engine on its half
// of the batch, reduce their gradients over the ZeroMQ ring. After a few AdamW steps both ranks
// hold bitwise the same weights, equal (within float32 reduction-order tolerance) to one engine
// that trained on the whole batch in this process.
#include <boost/test/unit_test.hpp>

#include <cblas.h>
#include <cmath>
#include <fstream>
#include <omp.h>

#include "gpu/engine/gemma4_train_engine.h"
#include "support/checkpoint_fixture.h"
#include "support/micro_batches.h"
#include "support/process_group.h"
#include "support/temp_dir.h"

namespace tg = tandem::gpu;
using namespace tandem::test::processes;
using tandem::test::checkpoint_builder;
using tandem::test::preset_config;
using tandem::test::temp_dir;

namespace {

const tg::packed_sequences half[2] = {{{3, 17, 29, 4, 88, 61}, {0, 6}}, {{9, 9, 200, 31, 7, 1, 2}, {0, 4, 7}}};
const tg::global_counts counts{5 + 3 + 2, 3};

tg::train_micro_batch_data batch(tg::train_engine& e, const tg::packed_sequences& s) {
  return tandem::test::on_policy_micro_batch(e, s, 0.5f);
}

std::unique_ptr<tg::gemma4_train_engine> engine(const std::filesystem::path& dir, tg::communicator* group) {
  auto c = tg::open_checkpoint(dir, tg::dtype::float32);
  if (!c) return nullptr;
  tg::train_engine_options o;
  o.adamw.lr = 1e-2;
  auto e = tg::gemma4_train_engine::create(tg::exec_context::cpu(), std::move(*c), o, group);
  return e ? std::move(*e) : nullptr;
}

std::vector<float> weights_of(const tg::gemma4_train_engine& e) {
  const auto* p = static_cast<const float*>(e.weights().view_of(0, tg::dtype::float32, std::vector<std::int64_t>{1})->data());
  return {p, p + e.layout().total_elements};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gemma4_train_engine_processes)

BOOST_AUTO_TEST_CASE(two_ranks_on_the_zeromq_ring_stay_bitwise_identical_and_match_one_rank_on_the_whole_batch) {
  temp_dir t;
  checkpoint_builder b(t.path() / "model");
  const std::string config = preset_config("tiny-all");
  b.set_config(config);
  b.add_text_stack(*tg::parse_model_config(config, "config.json"), tg::dtype::float32, 4);
  b.write();
  constexpr int steps = 3;

  zmq_group_options options;
  options.timeout = std::chrono::seconds(60);
  process_group group(2, options, [&](zmq_group& g, int up, int) {
    // A forked child must not use the OpenMP or OpenBLAS thread pools the parent may have started
    // (their threads did not survive the fork): one thread each.
    omp_set_num_threads(1);
    openblas_set_num_threads(1);
    auto e = engine(b.dir(), &g);
    if (!e) {
      write_line(up, "error: no engine");
      return;
    }
    for (int s = 0; s < steps; ++s) {
      auto mb = e->train_micro_batch(batch(*e, half[g.rank()]), {}, counts, {});
      auto r = mb ? e->optimizer_step() : tg::result<tg::optimizer_result>(mb.error());
      if (!r) {
        write_line(up, "error: " + r.error().message());
        return;
      }
    }
    const auto w = weights_of(*e);
    std::ofstream(t.path() / ("rank" + std::to_string(g.rank()) + ".bin"), std::ios::binary)
        .write(reinterpret_cast<const char*>(w.data()), static_cast<std::streamsize>(w.size() * 4));
    write_line(up, "ok " + std::to_string(fnv(w.data(), w.size() * 4)));
  });
  const std::string r0 = group.line_from(0), r1 = group.line_from(1);
  BOOST_REQUIRE_MESSAGE(r0.starts_with("ok "), r0);
  BOOST_REQUIRE_MESSAGE(r1.starts_with("ok "), r1);
  BOOST_TEST(r0 == r1, "the ranks' weights differ");
  BOOST_TEST(group.exit_code(0) == 0);
  BOOST_TEST(group.exit_code(1) == 0);

  auto single = engine(b.dir(), nullptr);
  BOOST_REQUIRE(single);
  for (int s = 0; s < steps; ++s) {
    BOOST_REQUIRE(single->train_micro_batch(batch(*single, half[0]), {}, counts, {}).has_value());
    BOOST_REQUIRE(single->train_micro_batch(batch(*single, half[1]), {}, counts, {}).has_value());
    BOOST_REQUIRE(single->optimizer_step().has_value());
  }
  const auto want = weights_of(*single);
  std::vector<float> got(want.size());
  std::ifstream(t.path() / "rank0.bin", std::ios::binary).read(reinterpret_cast<char*>(got.data()), static_cast<std::streamsize>(got.size() * 4));
  double worst = 0;
  for (std::size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::abs(static_cast<double>(got[i]) - want[i]));
  BOOST_TEST(worst < 1e-5, "two processes vs one: max |difference| " << worst);
}

BOOST_AUTO_TEST_SUITE_END()
