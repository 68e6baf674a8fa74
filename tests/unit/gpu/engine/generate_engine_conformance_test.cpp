// One conformance suite of the generate_engine contract (gpu/engine/generate_engine.h), run
// against every engine: the fake and the Gemma 4 engine on the CPU here; built a second time into
// the CUDA test program (TANDEM_TESTS_ON_CUDA, CTest label gpu), against the Gemma 4 engine on
// cuda:0 in float32 and in bfloat16. Each engine runs beside a train engine of the same model, on
// the same device, for the refit and sharing cases. Each case states a property of the contract;
// an engine-specific behaviour belongs in that engine's own tests.
#include <boost/test/unit_test.hpp>
#include <boost/mpl/list.hpp>

#include <filesystem>
#include <map>
#include <memory>

#include "gpu/engine/gemma4_generate_engine.h"
#include "gpu/engine/gemma4_train_engine.h"
#include "gpu/engine/fake/fake_generate_engine.h"
#include "gpu/engine/fake/fake_train_engine.h"

namespace tg = tandem::gpu;
namespace fs = std::filesystem;

namespace {

constexpr std::int64_t bucket_bytes = 4096;

struct pair_of_engines {
  std::unique_ptr<tg::generate_engine> generator;
  std::unique_ptr<tg::train_engine> trainer;
};

struct fake_engines {
  static constexpr std::int32_t vocab = 64;
  static pair_of_engines make(tg::refit_receive receive = tg::refit_receive::staging) {
    tg::fake_model_options m;
    m.weight_bytes = 16384;
    m.vocab = vocab;
    tg::fake_generate_options g;
    g.model = m;
    g.bucket_bytes = bucket_bytes;
    g.receive = receive;
    return {std::make_unique<tg::fake_generate_engine>(g), std::make_unique<tg::fake_train_engine>(m)};
  }
};

// The Gemma 4 engines over the all-features fixture, on the CPU or on cuda:0, in `weights`
// (bfloat16: CUDA only).
template <tg::device_kind where, tg::dtype weights = tg::dtype::float32>
struct gemma4_engines {
  static constexpr std::int32_t vocab = 256;
  static pair_of_engines make(tg::refit_receive receive = tg::refit_receive::staging) {
    const fs::path dir = fs::path(TANDEM_SOURCE_DIR) / "tests/data/reference/all_features";
    auto open = [&] { return *tg::open_checkpoint(dir, weights); };
    tg::exec_context ctx;
    ctx.dev = where == tg::device_kind::cpu ? tg::device::cpu() : tg::device::cuda(0);
    tg::gemma4_generate_options g;
    g.bucket_bytes = bucket_bytes;
    g.max_sequence_length = 256;
    g.receive = receive;
    auto gen = tg::gemma4_generate_engine::create(ctx, open(), g);
    BOOST_REQUIRE_MESSAGE(gen.has_value(), (gen.has_value() ? "" : gen.error().message()));
    auto train = tg::gemma4_train_engine::create(ctx, open(), {});
    BOOST_REQUIRE_MESSAGE(train.has_value(), (train.has_value() ? "" : train.error().message()));
    return {std::move(*gen), std::move(*train)};
  }
};

#if TANDEM_TESTS_ON_CUDA
using engines = boost::mpl::list<gemma4_engines<tg::device_kind::cuda>, gemma4_engines<tg::device_kind::cuda, tg::dtype::bfloat16>>;
#else
using engines = boost::mpl::list<fake_engines, gemma4_engines<tg::device_kind::cpu>>;
#endif

tg::generation_request request(std::uint64_t id, std::vector<std::int32_t> prompt, std::int32_t max_new) {
  tg::generation_request r;
  r.id = id;
  r.prompt = std::move(prompt);
  r.max_new_tokens = max_new;
  r.rng = {3, 1, 0, static_cast<std::uint32_t>(id), 0, 0};
  return r;
}

std::map<std::uint64_t, tg::finished_sequence> run_all(tg::generate_engine& e) {
  std::map<std::uint64_t, tg::finished_sequence> out;
  for (int i = 0; i < 10000; ++i) {
    auto left = e.step();
    BOOST_REQUIRE_MESSAGE(left.has_value(), (left.has_value() ? "" : left.error().message()));
    for (auto& f : e.collect()) {
      BOOST_TEST(out.count(f.id) == 0u, "request " << f.id << " finished twice");
      out[f.id] = std::move(f);
    }
    if (*left == 0) return out;
  }
  BOOST_FAIL("the engine did not finish");
  return out;
}

/// Stages and commits the trainer's weights as `version` through the bucket route.
tg::status refit(tg::generate_engine& g, const tg::train_engine& t, std::uint64_t version, std::size_t skip = SIZE_MAX) {
  const tg::bucket_plan plan(t.manifest(), bucket_bytes);
  if (auto s = g.begin_weight_update(version); !s) return s;
  for (std::size_t i = 0; i < plan.bucket_count(); ++i) {
    if (i == skip) continue;
    std::vector<std::byte> b(static_cast<std::size_t>(plan.bucket_size(i)));
    if (auto s = t.export_bucket(plan, i, b); !s) return s;
    if (auto s = g.import_bucket(i, b); !s) return s;
  }
  return g.commit_weight_update();
}

void train_once(tg::train_engine& t) {
  BOOST_REQUIRE(t.train_cross_entropy({{1, 2, 3, 4, 5}, {0, 5}}, 4).has_value());
  BOOST_REQUIRE(t.optimizer_step().has_value());
}

}  // namespace

BOOST_AUTO_TEST_SUITE(generate_engine_conformance)

BOOST_AUTO_TEST_CASE_TEMPLATE(every_request_finishes_once_with_one_logprob_per_token_and_the_live_version, E, engines) {
  auto e = E::make();
  std::vector<tg::generation_request> rs;
  for (std::uint64_t i = 0; i < 7; ++i) rs.push_back(request(i, {static_cast<std::int32_t>(i + 1), 3}, static_cast<std::int32_t>(1 + i % 4)));
  rs[2].stop_tokens = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  BOOST_REQUIRE(e.generator->submit(rs).is_ok());
  const auto done = run_all(*e.generator);
  BOOST_REQUIRE(done.size() == rs.size());
  for (const auto& r : rs) {
    const auto& f = done.at(r.id);
    BOOST_TEST(f.tokens.size() == f.logprobs.size());
    BOOST_TEST(f.tokens.size() <= static_cast<std::size_t>(r.max_new_tokens));
    BOOST_TEST(f.weight_version == 0u);
    for (std::int32_t t : f.tokens) BOOST_TEST((t >= 0 && t < E::vocab));
    for (float lp : f.logprobs) BOOST_TEST(lp <= 0.0f);
    const bool stopped = !f.tokens.empty() &&
                         std::find(r.stop_tokens.begin(), r.stop_tokens.end(), f.tokens.back()) != r.stop_tokens.end();
    BOOST_TEST((f.reason == (stopped ? tg::finish_reason::stop_token : tg::finish_reason::length)), "request " << r.id);
    if (!stopped) BOOST_TEST(f.tokens.size() == static_cast<std::size_t>(r.max_new_tokens));
  }
  BOOST_TEST(e.generator->collect().empty());
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_bad_batch_is_refused_whole_and_the_queue_keeps_what_it_had, E, engines) {
  auto e = E::make();
  const auto good = request(1, {1, 2}, 2);
  BOOST_REQUIRE(e.generator->submit(std::span(&good, 1)).is_ok());
  for (const auto& bad : {request(2, {}, 2), request(1, {3}, 2), request(3, {1}, 100000)}) {
    const std::vector<tg::generation_request> batch{request(9, {4}, 2), bad};
    BOOST_TEST(!e.generator->submit(batch).is_ok(), "request " << bad.id);
  }
  const auto done = run_all(*e.generator);
  BOOST_TEST(done.size() == 1u);
  BOOST_TEST(done.count(1) == 1u);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_request_gives_the_same_tokens_and_logprobs_alone_and_in_a_batch, E, engines) {
  const auto target = request(5, {7, 1, 4}, 6);
  auto a = E::make();
  BOOST_REQUIRE(a.generator->submit(std::span(&target, 1)).is_ok());
  const auto alone = run_all(*a.generator).at(5);
  auto b = E::make();
  std::vector<tg::generation_request> rs{request(1, {3}, 9), request(2, {7, 1, 4}, 2), target, request(4, {2, 2, 2, 2}, 4)};
  BOOST_REQUIRE(b.generator->submit(rs).is_ok());
  const auto batched = run_all(*b.generator).at(5);
  BOOST_TEST((batched.tokens == alone.tokens));
  BOOST_TEST((batched.logprobs == alone.logprobs));
}

BOOST_AUTO_TEST_CASE_TEMPLATE(weight_updates_wait_for_the_queue_and_a_partial_refit_keeps_the_old_version, E, engines) {
  auto e = E::make();
  train_once(*e.trainer);
  const auto r = request(1, {1, 2}, 3);
  BOOST_REQUIRE(e.generator->submit(std::span(&r, 1)).is_ok());
  BOOST_TEST(!e.generator->begin_weight_update(1).is_ok(), "a sequence waits");
  const auto before = run_all(*e.generator).at(1);
  const tg::status partial = refit(*e.generator, *e.trainer, 1, 1);
  BOOST_TEST(!partial.is_ok());
  BOOST_TEST(e.generator->weight_version() == 0u);
  BOOST_REQUIRE(e.generator->submit(std::span(&r, 1)).is_ok());
  const auto still = run_all(*e.generator).at(1);
  BOOST_TEST((still.tokens == before.tokens), "the old weights still generate");
  BOOST_TEST(still.weight_version == 0u);
  BOOST_REQUIRE(refit(*e.generator, *e.trainer, 1).is_ok());
  BOOST_TEST(e.generator->weight_version() == 1u);
  BOOST_TEST(!refit(*e.generator, *e.trainer, 1).is_ok(), "not newer");
  BOOST_REQUIRE(e.generator->submit(std::span(&r, 1)).is_ok());
  BOOST_TEST(run_all(*e.generator).at(1).weight_version == 1u);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(an_in_place_refit_that_fails_leaves_no_weights_until_a_complete_one_commits, E, engines) {
  auto e = E::make(tg::refit_receive::in_place);
  BOOST_TEST((e.generator->receive() == tg::refit_receive::in_place));
  BOOST_TEST(e.generator->has_live_weights());
  train_once(*e.trainer);
  const auto r = request(1, {1, 2}, 3);
  const tg::status partial = refit(*e.generator, *e.trainer, 1, 1);
  BOOST_TEST(!partial.is_ok());
  BOOST_TEST(partial.message().find("no weights are live until a complete refit commits") != std::string::npos, partial.message());
  BOOST_TEST(!e.generator->has_live_weights());
  BOOST_TEST(e.generator->weight_version() == 0u, "the last version that was whole");
  const tg::status refused = e.generator->submit(std::span(&r, 1));
  BOOST_TEST(!refused.is_ok(), "nothing generates from half-written weights");
  BOOST_TEST(refused.message().find("no weights are live") != std::string::npos, refused.message());
  BOOST_REQUIRE(e.generator->begin_weight_update(1).is_ok());  // the way back
  BOOST_TEST(!e.generator->has_live_weights(), "an open in-place update");
  e.generator->abort_weight_update();
  BOOST_TEST(!e.generator->has_live_weights(), "an aborted in-place update");
  BOOST_REQUIRE(refit(*e.generator, *e.trainer, 1).is_ok());
  BOOST_TEST(e.generator->has_live_weights());
  BOOST_TEST(e.generator->weight_version() == 1u);
  BOOST_REQUIRE(e.generator->submit(std::span(&r, 1)).is_ok());
  BOOST_TEST(run_all(*e.generator).at(1).weight_version == 1u);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_refit_received_in_place_generates_what_a_staged_one_does, E, engines) {
  auto staged = E::make(tg::refit_receive::staging);
  auto in_place = E::make(tg::refit_receive::in_place);
  BOOST_TEST((staged.generator->receive() == tg::refit_receive::staging));
  const auto r = request(1, {3, 1, 4}, 5);
  for (std::uint64_t version = 1; version <= 2; ++version) {
    train_once(*staged.trainer);
    train_once(*in_place.trainer);
    BOOST_REQUIRE(refit(*staged.generator, *staged.trainer, version).is_ok());
    BOOST_REQUIRE(refit(*in_place.generator, *in_place.trainer, version).is_ok());
    BOOST_REQUIRE(staged.generator->submit(std::span(&r, 1)).is_ok());
    BOOST_REQUIRE(in_place.generator->submit(std::span(&r, 1)).is_ok());
    const auto a = run_all(*staged.generator).at(1), b = run_all(*in_place.generator).at(1);
    BOOST_TEST((a.tokens == b.tokens), "version " << version);
    BOOST_TEST((a.logprobs == b.logprobs), "version " << version);
    BOOST_TEST(b.weight_version == version);
  }
}

BOOST_AUTO_TEST_CASE_TEMPLATE(shared_weights_make_a_refit_a_bump_and_own_weights_refuse_one, E, engines) {
  auto own = E::make();
  BOOST_TEST(!own.generator->bump_weight_version(1).is_ok());
  BOOST_TEST(!own.generator->shares_weights());
  auto e = E::make();
  BOOST_REQUIRE(e.generator->share_weights(e.trainer->shared_weights()).is_ok());
  BOOST_TEST(e.generator->shares_weights());
  const auto r = request(1, {1, 2}, 4);
  BOOST_REQUIRE(e.generator->submit(std::span(&r, 1)).is_ok());
  const auto before = run_all(*e.generator).at(1);
  train_once(*e.trainer);
  BOOST_TEST(!e.generator->begin_weight_update(1).is_ok(), "no buckets over shared weights");
  BOOST_REQUIRE(e.generator->bump_weight_version(1).is_ok());
  BOOST_TEST(!e.generator->bump_weight_version(1).is_ok(), "not newer");
  BOOST_REQUIRE(e.generator->submit(std::span(&r, 1)).is_ok());
  const auto after = run_all(*e.generator).at(1);
  BOOST_TEST(after.weight_version == 1u);
  BOOST_TEST((after.logprobs != before.logprobs), "the generator reads the trained weights");
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_released_cache_keeps_requests_queued_until_restored, E, engines) {
  auto e = E::make();
  BOOST_REQUIRE(e.generator->release_cache().is_ok());
  BOOST_TEST(!e.generator->cache_resident());
  const auto r = request(1, {3, 4}, 2);
  BOOST_REQUIRE(e.generator->submit(std::span(&r, 1)).is_ok());
  BOOST_TEST(!e.generator->step().has_value());
  BOOST_TEST(e.generator->release_cache().is_ok(), "already released: a no-op");
  BOOST_REQUIRE(e.generator->restore_cache().is_ok());
  BOOST_TEST(e.generator->cache_resident());
  BOOST_TEST(run_all(*e.generator).size() == 1u);
  BOOST_REQUIRE(e.generator->submit(std::span(&r, 1)).is_ok());
  BOOST_TEST(!e.generator->release_cache().is_ok(), "work waits");
}

BOOST_AUTO_TEST_SUITE_END()
