// One conformance suite of the train_engine contract (gpu/engine/train_engine.h), run against
// every engine: the fake and the Gemma 4 engine on the CPU here; built a second time into the CUDA
// test program (TANDEM_TESTS_ON_CUDA, CTest label gpu), against the Gemma 4 engine on cuda:0.
// Each case states a property of the contract; an engine-specific behaviour belongs in that
// engine's own tests.
#include <boost/test/unit_test.hpp>
#include <boost/mpl/list.hpp>

#include <cmath>
#include <cstring>
#include <memory>

#include "gpu/core/chunked_hash.h"
#include "gpu/core/memory.h"
#include "gpu/engine/gemma4_train_engine.h"
#include "gpu/engine/fake/fake_train_engine.h"
#include "gpu/engine/weight_source.h"
#include "support/checkpoint_fixture.h"
#include "support/micro_batches.h"
#include "support/temp_dir.h"

namespace tg = tandem::gpu;
using tandem::test::checkpoint_builder;
using tandem::test::preset_config;
using tandem::test::temp_dir;

namespace {

struct fake_engine {
  static constexpr std::int32_t vocab = 64;
  std::unique_ptr<tg::train_engine> make(const temp_dir&, tg::train_engine_options train = {}) {
    tg::fake_model_options o;
    o.weight_bytes = 4096;
    o.vocab = vocab;
    return std::make_unique<tg::fake_train_engine>(o, train);
  }
};

// The Gemma 4 engine over a random tiny-all checkpoint, on the CPU or on cuda:0, its weights in
// `weights` (bfloat16: CUDA only).
template <tg::device_kind where, tg::dtype weights = tg::dtype::float32>
struct gemma4_engine {
  static constexpr std::int32_t vocab = 256;
  std::unique_ptr<tg::train_engine> make(const temp_dir& t, tg::train_engine_options o = {}) {
    static int made = 0;
    checkpoint_builder b(t.path() / ("model-" + std::to_string(made++)));
    const std::string config = preset_config("tiny-all");
    b.set_config(config);
    b.add_text_stack(*tg::parse_model_config(config, "config.json"), tg::dtype::float32, 9);
    b.write();
    auto c = tg::open_checkpoint(b.dir(), weights);
    BOOST_REQUIRE(c.has_value());
    tg::exec_context ctx;
    ctx.dev = where == tg::device_kind::cpu ? tg::device::cpu() : tg::device::cuda(0);
    auto e = tg::gemma4_train_engine::create(ctx, std::move(*c), o);
    BOOST_REQUIRE_MESSAGE(e.has_value(), (e.has_value() ? "" : e.error().message()));
    return std::move(*e);
  }
};

#if TANDEM_TESTS_ON_CUDA
using engines = boost::mpl::list<gemma4_engine<tg::device_kind::cuda>, gemma4_engine<tg::device_kind::cuda, tg::dtype::bfloat16>>;
#else
using engines = boost::mpl::list<fake_engine, gemma4_engine<tg::device_kind::cpu>>;
#endif

// The refit byte stream of shared weights, read into host memory from wherever they live.
std::vector<std::byte> host_stream(const tg::weight_source& w) {
  std::vector<std::byte> stream;
  for (std::size_t i = 0; i < w.tensors.size(); ++i) {
    std::vector<std::byte> bytes(static_cast<std::size_t>(w.manifest[i].bytes()));
    BOOST_REQUIRE(tg::copy_to_host(w.dev, bytes.data(), w.tensors[i], static_cast<std::int64_t>(bytes.size())).is_ok());
    stream.insert(stream.end(), bytes.begin(), bytes.end());
  }
  return stream;
}

tg::packed_sequences two_sequences(std::int32_t vocab) {
  return {{1, 5, 9 % vocab, 3, 7, 2, 11 % vocab, 4}, {0, 5, 8}};
}

tg::train_micro_batch_data micro_batch(tg::train_engine& e, const tg::packed_sequences& s) {
  return tandem::test::on_policy_micro_batch(e, s);
}

std::vector<std::byte> exported(const tg::train_engine& e) {
  const tg::bucket_plan plan(e.manifest(), 1000);
  std::vector<std::byte> all;
  for (std::size_t i = 0; i < plan.bucket_count(); ++i) {
    std::vector<std::byte> b(static_cast<std::size_t>(plan.bucket_size(i)));
    BOOST_REQUIRE(e.export_bucket(plan, i, b).is_ok());
    all.insert(all.end(), b.begin(), b.end());
  }
  return all;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(train_engine_conformance)

BOOST_AUTO_TEST_CASE_TEMPLATE(logprobs_give_one_value_per_token_zero_at_each_sequence_start, E, engines) {
  temp_dir t;
  auto e = E{}.make(t);
  const auto s = two_sequences(E::vocab);
  const auto lp = e->logprobs(s, {});
  BOOST_REQUIRE_MESSAGE(lp.has_value(), (lp.has_value() ? "" : lp.error().message()));
  BOOST_REQUIRE(lp->size() == s.tokens.size());
  BOOST_TEST((*lp)[0] == 0.0f);
  BOOST_TEST((*lp)[5] == 0.0f);
  for (std::size_t i : {1u, 2u, 3u, 4u, 6u, 7u}) BOOST_TEST(((*lp)[i] < 0.0f && std::isfinite((*lp)[i])), "token " << i);
  BOOST_TEST((*e->logprobs(s, {}) == *lp), "logprobs are deterministic");
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_sequence_scores_the_same_alone_and_in_a_batch, E, engines) {
  temp_dir t;
  auto e = E{}.make(t);
  const auto both = *e->logprobs(two_sequences(E::vocab), {});
  const auto second = *e->logprobs({{2, 11 % E::vocab, 4}, {0, 3}}, {});
  BOOST_TEST((std::vector<float>(both.begin() + 5, both.end()) == second));
}

BOOST_AUTO_TEST_CASE_TEMPLATE(malformed_batches_are_refused_and_change_nothing, E, engines) {
  temp_dir t;
  auto e = E{}.make(t);
  const auto before = exported(*e);
  BOOST_TEST(!e->logprobs({{1, 2, 3}, {0, 2}}, {}).has_value());          // offsets end short
  BOOST_TEST(!e->logprobs({{1, 2, E::vocab}, {0, 3}}, {}).has_value());   // a token outside the vocabulary
  BOOST_TEST(!e->logprobs({{1, 2}, {0, 2}}, {0.0, 0, 1.0}).has_value());  // temperature 0
  auto mb = micro_batch(*e, two_sequences(E::vocab));
  mb.mask.pop_back();
  BOOST_TEST(!e->train_micro_batch(mb, {}, {7, 2}, {}).has_value());
  BOOST_TEST((exported(*e) == before));
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_step_changes_the_weights_and_the_manifest_covers_the_buckets, E, engines) {
  temp_dir t;
  auto e = E{}.make(t);
  const auto before = exported(*e);
  std::int64_t manifest_bytes = 0;
  for (const auto& m : e->manifest()) manifest_bytes += m.bytes();
  BOOST_TEST(static_cast<std::int64_t>(before.size()) == manifest_bytes);
  const auto mb = micro_batch(*e, two_sequences(E::vocab));
  const auto metrics = e->train_micro_batch(mb, {}, {7, 2}, {});
  BOOST_REQUIRE_MESSAGE(metrics.has_value(), (metrics.has_value() ? "" : metrics.error().message()));
  BOOST_TEST(metrics->token_count == 6);
  const auto r = e->optimizer_step();
  BOOST_REQUIRE_MESSAGE(r.has_value(), (r.has_value() ? "" : r.error().message()));
  BOOST_TEST(r->step == 1);
  BOOST_TEST(r->grad_norm > 0);
  BOOST_TEST((exported(*e) != before));
  const tg::bucket_plan plan(e->manifest(), 1000);
  std::vector<std::byte> wrong(static_cast<std::size_t>(plan.bucket_size(0)) + 1);
  BOOST_TEST(!e->export_bucket(plan, 0, wrong).is_ok());
  BOOST_TEST(!e->export_bucket(plan, plan.bucket_count(), wrong).is_ok());
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_saved_engine_loads_back_to_the_same_weights, E, engines) {
  temp_dir t;
  auto e = E{}.make(t);
  BOOST_REQUIRE(e->train_micro_batch(micro_batch(*e, two_sequences(E::vocab)), {}, {7, 2}, {}).has_value());
  BOOST_REQUIRE(e->optimizer_step().has_value());
  const auto trained = exported(*e);
  const tg::status saved = e->save(t.path() / "saved");
  BOOST_REQUIRE_MESSAGE(saved.is_ok(), saved.message());
  auto fresh = E{}.make(t);
  BOOST_TEST((exported(*fresh) != trained));
  const tg::status loaded = fresh->load(t.path() / "saved");
  BOOST_REQUIRE_MESSAGE(loaded.is_ok(), loaded.message());
  BOOST_TEST((exported(*fresh) == trained));
  BOOST_TEST(!fresh->load(t.path() / "no-such-save").is_ok());
  BOOST_TEST((exported(*fresh) == trained), "a failed load changes nothing");
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_train_step_is_its_micro_batches_then_the_optimizer_and_the_digest_follows_the_weights, E, engines) {
  temp_dir t;
  auto a = E{}.make(t), b = E{}.make(t);
  BOOST_TEST(a->weights_digest() == b->weights_digest(), "equal weights, equal digests");
  const std::vector<tg::train_micro_batch_data> mbs{micro_batch(*a, {{1, 5, 9 % E::vocab, 3, 7}, {0, 5}}),
                                                    micro_batch(*a, {{2, 11 % E::vocab, 4}, {0, 3}})};
  const auto step = a->train_step(mbs, {}, {6, 2}, {});
  BOOST_REQUIRE_MESSAGE(step.has_value(), (step.has_value() ? "" : step.error().message()));
  BOOST_TEST(step->metrics.token_count == 6);
  BOOST_TEST(step->optimizer.step == 1);
  for (const auto& mb : mbs) BOOST_REQUIRE(b->train_micro_batch(mb, {}, {6, 2}, {}).has_value());
  BOOST_REQUIRE(b->optimizer_step().has_value());
  BOOST_TEST((exported(*a) == exported(*b)));
  BOOST_TEST(a->weights_digest() == b->weights_digest());
  const std::uint64_t trained = a->weights_digest();

  auto bad = mbs;
  bad[1].mask.pop_back();
  const auto refused = a->train_step(bad, {}, {6, 2}, {});
  BOOST_REQUIRE(!refused.has_value());
  BOOST_TEST(refused.error().message().find("micro-batch 1: ") == 0, refused.error().message());
  BOOST_TEST(a->weights_digest() == trained, "a failed step leaves the weights");
}

BOOST_AUTO_TEST_CASE_TEMPLATE(cross_entropy_is_the_mean_negative_logprob_and_training_on_it_lowers_it, E, engines) {
  temp_dir t;
  auto e = E{}.make(t);
  const auto s = two_sequences(E::vocab);
  const auto lp = *e->logprobs(s, {});
  double want = 0;
  for (float v : lp) want -= v;
  want /= 6;  // 6 predicted tokens
  const auto loss = e->train_cross_entropy(s, 6);
  BOOST_REQUIRE_MESSAGE(loss.has_value(), (loss.has_value() ? "" : loss.error().message()));
  BOOST_TEST(*loss == want, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(!e->train_cross_entropy(s, 0).has_value());
  BOOST_REQUIRE(e->optimizer_step().has_value());
  BOOST_TEST((*e->logprobs(s, {}) != lp), "the step changed the model");
}

BOOST_AUTO_TEST_CASE_TEMPLATE(shared_weights_are_the_refit_stream_in_place_and_follow_every_step, E, engines) {
  temp_dir t;
  auto e = E{}.make(t);
  const tg::weight_source before = e->shared_weights();
  BOOST_REQUIRE(tg::check_weight_source("test", before, e->manifest()).is_ok());
  const std::vector<std::byte> stream = host_stream(before);
  BOOST_TEST(tg::chunked_xxh3(stream) == e->weights_digest());
  BOOST_TEST((stream == exported(*e)));
  const auto s = two_sequences(E::vocab);
  BOOST_REQUIRE(e->train_micro_batch(micro_batch(*e, s), {}, {6, 2}, {}).has_value());
  BOOST_REQUIRE(e->optimizer_step().has_value());
  const tg::weight_source after = e->shared_weights();
  BOOST_TEST((after.tensors == before.tensors), "the step rewrote the weights where they were");
  BOOST_TEST(tg::chunked_xxh3(host_stream(before)) == e->weights_digest());
  BOOST_TEST(e->weights_digest() != tg::chunked_xxh3(stream), "the step changed the weights");
}

BOOST_AUTO_TEST_CASE_TEMPLATE(an_offloaded_engine_scores_but_trains_only_after_restore_and_loses_no_state, E, engines) {
  temp_dir t;
  auto a = E{}.make(t), b = E{}.make(t);
  const auto s = two_sequences(E::vocab);
  for (auto* e : {a.get(), b.get()}) {
    BOOST_REQUIRE(e->train_micro_batch(micro_batch(*e, s), {}, {6, 2}, {}).has_value());
    BOOST_REQUIRE(e->optimizer_step().has_value());
  }
  BOOST_REQUIRE(a->train_micro_batch(micro_batch(*a, s), {}, {6, 2}, {}).has_value());
  BOOST_TEST(!a->offload_state().is_ok(), "pending gradients would be lost");
  a->zero_gradients();
  const auto lp = *a->logprobs(s, {});
  BOOST_REQUIRE(a->offload_state().is_ok());
  BOOST_TEST((a->memory_state() == tg::train_memory_state::offloaded));
  BOOST_REQUIRE(a->offload_state().is_ok());  // already there
  BOOST_TEST((*a->logprobs(s, {}) == lp));
  BOOST_TEST(tg::chunked_xxh3(host_stream(a->shared_weights())) == a->weights_digest());
  const auto refused = a->train_micro_batch(micro_batch(*a, s), {}, {6, 2}, {});
  BOOST_REQUIRE(!refused.has_value());
  BOOST_TEST(refused.error().message().find("offloaded") != std::string::npos, refused.error().message());
  BOOST_TEST(!a->optimizer_step().has_value());
  BOOST_TEST(!a->save(t.path() / "while-offloaded").is_ok());
  BOOST_REQUIRE(a->restore_state().is_ok());
  BOOST_TEST((a->memory_state() == tg::train_memory_state::resident));
  // The second step, with moments that went out and came back, equals the never-offloaded twin's.
  for (auto* e : {a.get(), b.get()}) {
    BOOST_REQUIRE(e->train_micro_batch(micro_batch(*e, s), {}, {6, 2}, {}).has_value());
    BOOST_REQUIRE(e->optimizer_step().has_value());
  }
  BOOST_TEST(a->weights_digest() == b->weights_digest());
}

BOOST_AUTO_TEST_CASE_TEMPLATE(the_learning_rate_follows_the_warm_up_of_the_options, E, engines) {
  temp_dir t;
  tg::train_engine_options o;
  o.adamw.lr = 1e-3;
  o.warmup_steps = 2;
  o.warmup_start_factor = 0.25;
  auto e = E{}.make(t, o);
  const auto s = two_sequences(E::vocab);
  for (const double want : {0.25e-3, 0.625e-3, 1e-3, 1e-3}) {
    BOOST_REQUIRE(e->train_micro_batch(micro_batch(*e, s), {}, {6, 2}, {}).has_value());
    const auto r = e->optimizer_step();
    BOOST_REQUIRE(r.has_value());
    BOOST_TEST(r->lr == want, boost::test_tools::tolerance(1e-12));
  }
}

BOOST_AUTO_TEST_SUITE_END()
