// The Gemma 4 generate engine (gpu/engine/gemma4_generate_engine.h): greedy continuations equal
// transformers' on every fixture, sampled tokens are scored bit for bit by the train engine,
// thousands of random requests under preemption each equal the request alone, decode steps
// replayed from captures equal steps run op by op, one row per
// decoding sequence per step, sliding blocks bounded by the window, refits that fail leave the old
// version generating, and bad requests are refused by name. Built for the CPU here, and a second
// time into the CUDA test program (TANDEM_TESTS_ON_CUDA, CTest label gpu) for the engine on
// cuda:0, where the scoring case runs in bfloat16 too and the CUDA engine is compared with the
// CPU engine.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include <nlohmann/json.hpp>

#include "gpu/core/host_waits.h"
#include "gpu/engine/gemma4_generate_engine.h"
#include "gpu/engine/gemma4_train_engine.h"
#include "gpu/ops/pg_loss.h"
#include "support/reference_fixtures.h"
#include "support/temp_dir.h"

namespace tg = tandem::gpu;
namespace fs = std::filesystem;
using tandem::test::temp_dir;

namespace {

const fs::path fixtures = fs::path(TANDEM_SOURCE_DIR) / "tests/data/reference";

#if TANDEM_TESTS_ON_CUDA
const tg::exec_context test_context{tg::device::cuda(0), {}, nullptr};
const std::vector<tg::dtype> test_types{tg::dtype::float32, tg::dtype::bfloat16};
#else
const tg::exec_context test_context = tg::exec_context::cpu();
const std::vector<tg::dtype> test_types{tg::dtype::float32};
#endif

tg::checkpoint open(const fs::path& dir, tg::dtype type = tg::dtype::float32) {
  auto c = tg::open_checkpoint(dir, type);
  BOOST_REQUIRE_MESSAGE(c.has_value(), (c.has_value() ? "" : c.error().message()));
  return std::move(*c);
}

std::unique_ptr<tg::gemma4_generate_engine> engine(const fs::path& dir, tg::gemma4_generate_options o = {},
                                                   tg::dtype type = tg::dtype::float32,
                                                   const tg::exec_context& ctx = test_context) {
  auto e = tg::gemma4_generate_engine::create(ctx, open(dir, type), o);
  BOOST_REQUIRE_MESSAGE(e.has_value(), (e.has_value() ? "" : e.error().message()));
  return std::move(*e);
}

std::unique_ptr<tg::gemma4_train_engine> train_engine(const fs::path& dir, tg::dtype type = tg::dtype::float32) {
  auto e = tg::gemma4_train_engine::create(test_context, open(dir, type), {});
  BOOST_REQUIRE_MESSAGE(e.has_value(), (e.has_value() ? "" : e.error().message()));
  return std::move(*e);
}

tg::generation_request request(std::uint64_t id, std::vector<std::int32_t> prompt, std::int32_t max_new,
                               tg::ops::sampling_params sampling = {0.0, 0, 1.0}) {
  tg::generation_request r;
  r.id = id;
  r.prompt = std::move(prompt);
  r.max_new_tokens = max_new;
  r.sampling = sampling;
  r.rng = {7, 1, 0, static_cast<std::uint32_t>(id), 0, 0};
  return r;
}

std::map<std::uint64_t, tg::finished_sequence> run_all(tg::gemma4_generate_engine& e, int max_steps = 100000) {
  std::map<std::uint64_t, tg::finished_sequence> out;
  for (int i = 0; i < max_steps; ++i) {
    auto left = e.step();
    BOOST_REQUIRE_MESSAGE(left.has_value(), (left.has_value() ? "" : left.error().message()));
    for (auto& f : e.collect()) out[f.id] = std::move(f);
    if (*left == 0) return out;
  }
  BOOST_FAIL("the engine did not finish");
  return out;
}

tg::finished_sequence alone(const fs::path& dir, const tg::generation_request& r) {
  auto e = engine(dir);
  BOOST_REQUIRE(e->submit(std::span(&r, 1)).is_ok());
  auto done = run_all(*e);
  BOOST_REQUIRE(done.size() == 1u);
  return done.begin()->second;
}

std::vector<std::vector<std::int32_t>> read_sequences(const nlohmann::json& ref) {
  return ref.at("sequences").get<std::vector<std::vector<std::int32_t>>>();
}

nlohmann::json read_json(const fs::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

/// Counts the rows of "embed" (one per new row of a step) the forward is shown.
struct row_counter final : tg::trace_sink {
  std::vector<std::int64_t> rows;
  void record(std::string_view name, int, const tg::tensor& value) override {
    if (name == "embed") rows.push_back(value.dim(0));
  }
};

/// Samples continuations with weights in `type` and scores them with a train engine of the same
/// weights on the same device: every generated token's logprob the same bits, so
/// token_mult_prob_error is exactly 1.
void sampled_tokens_scored_bit_for_bit(tg::dtype type) {
  const fs::path dir = fixtures / "all_features";
  const tg::ops::sampling_params params{0.7, 20, 0.9};
  auto gen = engine(dir, {}, type);
  std::vector<tg::generation_request> requests;
  for (std::uint64_t i = 0; i < 12; ++i) {
    auto r = request(i, {static_cast<std::int32_t>(3 + i % 4), 17, static_cast<std::int32_t>(40 + i / 4)}, 14, params);
    r.rng.prompt = static_cast<std::uint32_t>(i / 4);  // groups of 4 samples of one prompt
    r.rng.sample = static_cast<std::uint32_t>(i % 4);
    requests.push_back(r);
  }
  BOOST_REQUIRE(gen->submit(requests).is_ok());
  const auto done = run_all(*gen);
  auto trainer = train_engine(dir, type);
  tg::packed_sequences batch{{}, {0}};
  std::vector<float> lp_gen, mask;
  for (const auto& r : requests) {
    const auto& f = done.at(r.id);
    batch.tokens.insert(batch.tokens.end(), r.prompt.begin(), r.prompt.end());
    batch.tokens.insert(batch.tokens.end(), f.tokens.begin(), f.tokens.end());
    batch.offsets.push_back(static_cast<std::int32_t>(batch.tokens.size()));
    lp_gen.insert(lp_gen.end(), r.prompt.size(), 0.0f);
    lp_gen.insert(lp_gen.end(), f.logprobs.begin(), f.logprobs.end());
    mask.insert(mask.end(), r.prompt.size(), 0.0f);
    mask.insert(mask.end(), f.tokens.size(), 1.0f);
  }
  const auto lp_train = trainer->logprobs(batch, params);
  BOOST_REQUIRE(lp_train.has_value());
  std::size_t differ = 0;
  double worst = 0;
  for (std::size_t t = 0; t < mask.size(); ++t)
    if (mask[t] != 0 && std::memcmp(&(*lp_train)[t], &lp_gen[t], 4) != 0) {
      ++differ;
      worst = std::max(worst, std::fabs(static_cast<double>((*lp_train)[t]) - lp_gen[t]));
    }
  BOOST_TEST(differ == 0u, differ << " generated tokens score other bits in the train engine (max |delta| " << worst << ")");
  // token_mult_prob_error as the loss reports it.
  tg::train_micro_batch_data mb;
  mb.sequences = batch;
  mb.lp_prev = *lp_train;
  mb.lp_gen = lp_gen;
  mb.mask = mask;
  mb.advantages.assign(mask.size(), 1.0f);
  std::int64_t tokens = 0;
  for (float m : mask) tokens += m != 0;
  float loss = 0;
  tg::ops::pg_loss_metrics metrics;
  const auto in = tg::pg_loss_inputs_of(mb, *lp_train, {tokens, static_cast<std::int64_t>(requests.size())});
  BOOST_REQUIRE(tg::ops::pg_loss_forward(tg::exec_context::cpu(), in, {}, tg::tensor(&loss, tg::dtype::float32, {1}), &metrics).is_ok());
  BOOST_TEST(metrics.mult_prob_error_sum / static_cast<double>(metrics.token_count) == 1.0);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gemma4_generate_engine)

BOOST_AUTO_TEST_CASE(greedy_generation_equals_transformers_on_every_fixture_in_both_config_forms) {
  std::size_t fixtures_seen = 0;
  for (const auto& entry : fs::directory_iterator(fixtures)) {
    const fs::path dir = entry.path();
    if (!fs::is_regular_file(dir / "reference.json")) continue;
    ++fixtures_seen;
    const nlohmann::json ref = read_json(dir / "reference.json");
    const auto prompts = read_sequences(ref);
    const auto& greedy = ref.at("greedy");
    temp_dir t;
    const fs::path alt = tandem::test::with_alt_config(dir, t);
    for (const fs::path& form : {dir, alt}) {
      auto e = engine(form);
      std::vector<tg::generation_request> requests;
      for (std::size_t s = 0; s < greedy.size(); ++s)
        requests.push_back(request(s, prompts.at(s), static_cast<std::int32_t>(greedy.at(s).size())));
      BOOST_REQUIRE(e->submit(requests).is_ok());
      const auto done = run_all(*e);
      for (std::size_t s = 0; s < greedy.size(); ++s)
        BOOST_TEST(done.at(s).tokens == greedy.at(s).get<std::vector<std::int32_t>>(),
                   dir.filename().string() << " (" << (form == dir ? "config.json" : "config.alt.json") << "), sequence " << s);
    }
  }
  BOOST_TEST(fixtures_seen >= 7u);
}

BOOST_AUTO_TEST_CASE(sampled_tokens_are_scored_bit_for_bit_by_the_train_engine) {
  for (const tg::dtype type : test_types) {
    BOOST_TEST_CONTEXT("weights in " << tg::to_string(type)) { sampled_tokens_scored_bit_for_bit(type); }
  }
}

BOOST_AUTO_TEST_CASE(random_requests_under_preemption_each_equal_the_request_alone_and_every_block_returns) {
  const fs::path dir = fixtures / "all_features";
  std::mt19937 rng(11);
  const auto pick = [&rng](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::vector<tg::generation_request> requests;
  std::vector<std::vector<std::int32_t>> shared_prompts;
  for (int i = 0; i < 6; ++i) {
    std::vector<std::int32_t> p(static_cast<std::size_t>(pick(2, 14)));
    for (auto& x : p) x = pick(0, 255);
    shared_prompts.push_back(p);
  }
  const std::vector<tg::ops::sampling_params> samplings = {{0.0, 0, 1.0}, {1.0, 0, 1.0}, {0.7, 20, 0.9}, {1.3, 5, 1.0}};
  for (std::uint64_t id = 0; id < 2000; ++id) {
    std::vector<std::int32_t> prompt;
    if (pick(0, 2) == 0) {
      prompt = shared_prompts[static_cast<std::size_t>(pick(0, 5))];  // GRPO groups
    } else {
      prompt.resize(static_cast<std::size_t>(pick(1, 20)));
      for (auto& x : prompt) x = pick(0, 255);
    }
    auto r = request(id, prompt, pick(1, 12), samplings[static_cast<std::size_t>(pick(0, 3))]);
    r.rng.sample = static_cast<std::uint32_t>(pick(0, 7));
    if (pick(0, 3) == 0) r.stop_tokens = {pick(0, 255), pick(0, 255)};
    requests.push_back(r);
  }
  std::shuffle(requests.begin(), requests.end(), rng);
  tg::gemma4_generate_options o;
  o.max_num_sequences = 24;
  o.kv_block_size = 4;
  o.prefill_token_budget = 37;
  o.kv_cache_bytes = 0;  // set below: a pool far smaller than 24 sequences need
  {
    auto probe = engine(dir);
    const auto full = tg::kv_cache_options_for(probe->config(), tg::dtype::float32, 4, 1 << 20);
    o.kv_cache_bytes = (1 << 20) / full.full_blocks * 40;  // 40 blocks of each pool
  }
  auto e = engine(dir, o);
  for (std::size_t at = 0; at < requests.size(); at += 500)  // in waves, as a rollout worker submits
    BOOST_REQUIRE(e->submit(std::span(requests).subspan(at, std::min<std::size_t>(500, requests.size() - at))).is_ok());
  const auto done = run_all(*e);
  BOOST_TEST(done.size() == requests.size());
  BOOST_TEST(e->preemptions() > 0, "the pool should have forced preemption");
  BOOST_TEST(e->shared_prefills() > 0, "groups should have shared their prompt");
  BOOST_TEST(e->cache()->used_blocks(tg::layer_type::full) == 0);
  BOOST_TEST(e->cache()->used_blocks(tg::layer_type::sliding) == 0);
  // Each equals the request run alone (one engine, one request at a time, nothing beside it).
  auto solo = engine(dir);
  std::size_t differ = 0;
  for (const auto& r : requests) {
    BOOST_REQUIRE(solo->submit(std::span(&r, 1)).is_ok());
    const auto want = run_all(*solo).at(r.id);
    const auto& got = done.at(r.id);
    const bool same = got.tokens == want.tokens && got.reason == want.reason &&
                      std::memcmp(got.logprobs.data(), want.logprobs.data(), 4 * want.logprobs.size()) == 0;
    if (!same && ++differ <= 5) BOOST_ERROR("request " << r.id << " differs from the same request alone");
  }
  BOOST_TEST(differ == 0u);
}

BOOST_AUTO_TEST_CASE(decode_steps_replayed_from_captures_and_overlapped_give_the_bits_of_steps_run_op_by_op) {
  // Mostly one set of sampling parameters (captured steps), some of another (steps run op by op),
  // a running limit that is no power of two (padded buckets) and a pool that forces preemption,
  // on a dense model and on one with MoE blocks (on CUDA its experts' forward keeps its counts on
  // the device while captured). Captured steps run one at a time, and overlapped (the next
  // enqueued before the last one's tokens are read: stop tokens drop rows, max_new_tokens and
  // admissions stop the overlap).
  for (const char* model : {"e2b_like", "all_features"}) {
    BOOST_TEST_CONTEXT(model) {
      const fs::path dir = fixtures / model;
      std::mt19937 rng(5);
      const auto pick = [&rng](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
      std::vector<tg::generation_request> requests;
      for (std::uint64_t id = 0; id < 400; ++id) {
        std::vector<std::int32_t> prompt(static_cast<std::size_t>(pick(1, 12)));
        for (auto& x : prompt) x = pick(0, 255);
        const tg::ops::sampling_params sampling = pick(0, 7) == 0 ? tg::ops::sampling_params{0.0, 0, 1.0}
                                                                  : tg::ops::sampling_params{0.7, 20, 0.9};
        auto r = request(id, prompt, pick(1, 40), sampling);
        if (pick(0, 3) == 0) r.stop_tokens = {pick(0, 255)};
        requests.push_back(r);
      }
      tg::gemma4_generate_options o;
      o.max_num_sequences = 13;
      o.kv_block_size = 4;
      {
        auto probe = engine(dir);
        const auto full = tg::kv_cache_options_for(probe->config(), tg::dtype::float32, 4, 1 << 20);
        o.kv_cache_bytes = (1 << 20) / full.full_blocks * 48;  // 48 blocks of each pool
      }
      // Then all 400 running at once, drawn alike (one set of parameters, so decode steps are
      // captured): buckets of 512 rows, whose head runs in chunks of 256.
      for (const std::int64_t running : {13, 400}) {
        o.max_num_sequences = running;
        if (running > 13)
          for (auto& r : requests) r.sampling = {0.7, 20, 0.9};
        // 0: op by op; 1: captured, one step at a time; 2: captured and overlapped
        std::map<std::uint64_t, tg::finished_sequence> done[3];
        std::int64_t captured_steps[3] = {}, captures[3] = {}, preempted[3] = {}, overlapped[3] = {}, extra[3] = {};
        for (const int mode : {0, 1, 2}) {
          o.capture_decode = mode > 0 ? tg::decode_capture_mode::always : tg::decode_capture_mode::never;
          o.overlap_decode = mode == 2;
          if (running > 13) o.kv_cache_bytes = 64 << 20;
          auto e = engine(dir, o);
          BOOST_REQUIRE(e->submit(requests).is_ok());
          done[mode] = run_all(*e);
          captured_steps[mode] = e->profile().captured_steps;
          captures[mode] = e->profile().captures;
          preempted[mode] = e->preemptions();
          overlapped[mode] = e->profile().overlapped_steps;
          // A step left in flight (its rows all stopped) is waited for by whatever moves the cache.
          BOOST_TEST(e->release_cache().is_ok());
          BOOST_TEST(!e->step_in_flight());
          BOOST_REQUIRE(e->restore_cache().is_ok());
          extra[mode] = e->profile().rows - e->profile().tokens;  // prompt rows, recomputed ones, dropped ones
          BOOST_TEST(e->cache()->used_blocks(tg::layer_type::full) == 0);
          BOOST_TEST(e->cache()->used_blocks(tg::layer_type::sliding) == 0);
        }
        BOOST_TEST_CONTEXT("at most " << running << " running") {
          BOOST_TEST(captured_steps[0] == 0);
          BOOST_TEST(overlapped[0] == 0);
          BOOST_TEST(overlapped[1] == 0);
          BOOST_TEST(extra[1] == extra[0]);
          BOOST_TEST(extra[2] >= extra[0]);
          BOOST_TEST(captured_steps[1] > 30, captured_steps[1] << " captured steps");
          BOOST_TEST(overlapped[2] > 20, overlapped[2] << " overlapped steps");
          BOOST_TEST(captures[1] >= 3, captures[1] << " captures: several buckets should have been met");
          if (running == 13) BOOST_TEST(preempted[1] > 0, "the pool should have forced preemption");
          for (const int mode : {1, 2}) {
            BOOST_REQUIRE(done[mode].size() == requests.size());
            std::size_t differ = 0;
            for (const auto& r : requests) {
              const auto& got = done[mode].at(r.id);
              const auto& want = done[0].at(r.id);
              const bool same = got.tokens == want.tokens && got.reason == want.reason &&
                                std::memcmp(got.logprobs.data(), want.logprobs.data(), 4 * want.logprobs.size()) == 0;
              if (!same && ++differ <= 5)
                BOOST_ERROR("request " << r.id << " differs between " << (mode == 1 ? "captured" : "overlapped") << " and op-by-op steps");
            }
            BOOST_TEST(differ == 0u);
          }
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(overlapped_decode_steps_of_sequences_that_end_together_by_length_compute_no_row_in_vain) {
  const fs::path dir = fixtures / "e2b_like";
  tg::gemma4_generate_options o;
  o.max_num_sequences = 6;
  o.capture_decode = tg::decode_capture_mode::always;
  auto e = engine(dir, o);
  std::vector<tg::generation_request> requests;
  for (std::uint64_t i = 0; i < 6; ++i)
    requests.push_back(request(i, {static_cast<std::int32_t>(5 + i), 40, 41}, 9, {0.7, 20, 0.9}));
  BOOST_REQUIRE(e->submit(requests).is_ok());
  const auto done = run_all(*e);
  BOOST_TEST(done.size() == requests.size());
  BOOST_TEST(!e->step_in_flight(), "the last step should not be followed");
  BOOST_TEST(e->profile().overlapped_steps >= 6, e->profile().overlapped_steps << " overlapped steps");
  BOOST_TEST(e->profile().tokens == 6 * 9);
  // Rows: 3 prompt rows and 8 decode rows a sequence (its last token is not fed back), none dropped.
  BOOST_TEST(e->profile().rows == 6 * (3 + 8));
}

BOOST_AUTO_TEST_CASE(a_decode_step_computes_one_row_per_running_sequence_and_sliding_blocks_stay_in_the_window) {
  const fs::path dir = fixtures / "all_features";
  row_counter rows;
  tg::gemma4_generate_options o;
  o.trace = tg::tracer(&rows);
  o.kv_block_size = 4;
  o.share_prompts = false;
  auto e = engine(dir, o);
  std::vector<tg::generation_request> requests;
  for (std::uint64_t i = 0; i < 3; ++i) requests.push_back(request(i, {5, 6, 7, static_cast<std::int32_t>(i)}, 40, {1.0, 0, 1.0}));
  requests.push_back(request(3, {9, 9}, 3000, {1.0, 0, 1.0}));
  BOOST_REQUIRE(e->submit(requests).is_ok());
  const std::int64_t window = e->config().sliding_window;
  std::int64_t steps = 0;
  for (;;) {
    const std::int64_t running = e->running_count() + e->waiting_count();
    const std::size_t before = rows.rows.size();
    auto left = e->step();
    BOOST_REQUIRE(left.has_value());
    BOOST_REQUIRE(rows.rows.size() == before + 1);  // one forward per step
    if (steps > 0) BOOST_TEST(rows.rows.back() == running, "step " << steps);  // prompts fit the first step
    // Every running sequence holds at most its window plus two partial blocks of sliding KV.
    BOOST_TEST(e->cache()->used_blocks(tg::layer_type::sliding) <= e->running_count() * ((window - 1) / 4 + 2));
    (void)e->collect();
    ++steps;
    if (*left == 0) break;
  }
  BOOST_TEST(steps == 3000);
}

BOOST_AUTO_TEST_CASE(a_refit_that_fails_midway_leaves_the_old_version_generating_and_a_complete_one_takes_over) {
  const fs::path dir = fixtures / "all_features";
  tg::gemma4_generate_options o;
  o.bucket_bytes = 4096;
  auto gen = engine(dir, o);
  auto trainer = train_engine(dir);
  BOOST_TEST(gen->weights_digest() == trainer->weights_digest());
  BOOST_REQUIRE(trainer->train_cross_entropy({{1, 2, 3, 4, 5, 6}, {0, 6}}, 5).has_value());
  BOOST_REQUIRE(trainer->optimizer_step().has_value());
  const std::uint64_t old_digest = gen->weights_digest();
  const auto r = request(1, {4, 5, 6}, 6);
  const auto before = alone(dir, r);

  const tg::bucket_plan& plan = gen->plan();
  BOOST_REQUIRE(plan.bucket_count() > 2u);
  const auto bucket = [&](std::size_t i) {
    std::vector<std::byte> b(static_cast<std::size_t>(plan.bucket_size(i)));
    BOOST_REQUIRE(trainer->export_bucket(plan, i, b).is_ok());
    return b;
  };
  BOOST_REQUIRE(gen->begin_weight_update(1).is_ok());
  BOOST_REQUIRE(gen->import_bucket(0, bucket(0)).is_ok());
  auto bad = bucket(1);
  bad.pop_back();
  const tg::status refused = gen->import_bucket(1, bad);
  BOOST_TEST(refused.message().find("version 0 stays live") != std::string::npos, refused.message());
  BOOST_TEST(!gen->commit_weight_update().is_ok());  // the update is gone
  BOOST_TEST(gen->weight_version() == 0u);
  BOOST_TEST(gen->weights_digest() == old_digest);
  BOOST_REQUIRE(gen->submit(std::span(&r, 1)).is_ok());
  auto done = run_all(*gen);
  BOOST_TEST((done.at(1).tokens == before.tokens));

  BOOST_REQUIRE(gen->begin_weight_update(1).is_ok());
  for (std::size_t i = 0; i + 1 < plan.bucket_count(); ++i) BOOST_REQUIRE(gen->import_bucket(i, bucket(i)).is_ok());
  const tg::status early = gen->commit_weight_update();
  BOOST_TEST(early.message().find("1 of " + std::to_string(plan.bucket_count()) + " buckets missing") != std::string::npos,
             early.message());
  BOOST_TEST(gen->weight_version() == 0u);
  BOOST_REQUIRE(gen->begin_weight_update(1).is_ok());
  for (std::size_t i = 0; i < plan.bucket_count(); ++i) BOOST_REQUIRE(gen->import_bucket(i, bucket(i)).is_ok());
  BOOST_REQUIRE(gen->commit_weight_update().is_ok());
  BOOST_TEST(gen->weight_version() == 1u);
  BOOST_TEST(gen->weights_digest() == trainer->weights_digest());
}

BOOST_AUTO_TEST_CASE(a_stop_token_met_while_the_next_step_runs_drops_its_row_and_a_refit_waits_for_that_step) {
  // One sampled request, overlapped: when the step that draws its stop token is read back, the next
  // step is already in flight; step() returns 0 with it running, its one row dropped. A refit (or
  // release_cache) then waits for it first.
  const fs::path dir = fixtures / "e2b_like";
  tg::gemma4_generate_options o;
  o.capture_decode = tg::decode_capture_mode::always;
  auto r = request(3, {9, 30, 31}, 12, {1.0, 0, 1.0});
  const auto free_run = [&] {
    auto e = engine(dir, o);
    BOOST_REQUIRE(e->submit(std::span(&r, 1)).is_ok());
    return run_all(*e).at(r.id);
  }();
  BOOST_REQUIRE(free_run.tokens.size() == 12u);
  // The first token from the fourth on that the request has not drawn before: its stop token.
  std::size_t j = 3;
  while (j < 11 && std::find(free_run.tokens.begin(), free_run.tokens.begin() + static_cast<std::ptrdiff_t>(j),
                             free_run.tokens[j]) != free_run.tokens.begin() + static_cast<std::ptrdiff_t>(j))
    ++j;
  BOOST_REQUIRE_MESSAGE(j < 11, "the sampled continuation repeats itself: no stop token to choose");
  r.stop_tokens = {free_run.tokens[j]};
  auto e = engine(dir, o);
  BOOST_REQUIRE(e->submit(std::span(&r, 1)).is_ok());
  const auto done = run_all(*e);
  const auto& f = done.at(r.id);
  BOOST_TEST((f.reason == tg::finish_reason::stop_token));
  BOOST_TEST((f.tokens == std::vector<std::int32_t>(free_run.tokens.begin(), free_run.tokens.begin() + static_cast<std::ptrdiff_t>(j) + 1)));
  BOOST_TEST(std::memcmp(f.logprobs.data(), free_run.logprobs.data(), 4 * (j + 1)) == 0);
  BOOST_TEST(e->step_in_flight(), "the step after the stop token should have been enqueued");
  // Rows are counted once read back: 3 prompt rows, j decode rows (the last token is not fed back).
  BOOST_TEST(e->profile().rows - e->profile().tokens == 2);
  BOOST_REQUIRE(e->begin_weight_update(1).is_ok());
  BOOST_TEST(!e->step_in_flight());
  BOOST_TEST(e->profile().rows - e->profile().tokens == 3, "the step in flight's one row, dropped");
  e->abort_weight_update();
  BOOST_TEST(e->cache()->used_blocks(tg::layer_type::full) == 0);
}

BOOST_AUTO_TEST_CASE(a_colocated_generator_reads_the_trainers_weights_in_place_and_a_refit_is_a_bump) {
  const fs::path dir = fixtures / "sliding_only";
  auto gen = engine(dir);
  auto trainer = train_engine(dir);
  BOOST_REQUIRE(gen->share_weights(trainer->shared_weights()).is_ok());
  BOOST_REQUIRE(trainer->train_cross_entropy({{1, 2, 3, 4, 5, 6}, {0, 6}}, 5).has_value());
  BOOST_REQUIRE(trainer->optimizer_step().has_value());
  BOOST_TEST(gen->weights_digest() == trainer->weights_digest());
  BOOST_TEST(!gen->begin_weight_update(1).is_ok());
  BOOST_REQUIRE(gen->bump_weight_version(1).is_ok());
  const auto r = request(2, {8, 9, 10}, 5, {1.0, 0, 1.0});
  BOOST_REQUIRE(gen->submit(std::span(&r, 1)).is_ok());
  const auto done = run_all(*gen);
  const auto& f = done.at(2);
  BOOST_TEST(f.weight_version == 1u);
  std::vector<std::int32_t> all = r.prompt;
  all.insert(all.end(), f.tokens.begin(), f.tokens.end());
  const auto lp = trainer->logprobs({all, {0, static_cast<std::int32_t>(all.size())}}, r.sampling);
  BOOST_REQUIRE(lp.has_value());
  BOOST_TEST(std::memcmp(lp->data() + r.prompt.size(), f.logprobs.data(), 4 * f.logprobs.size()) == 0);
}

BOOST_AUTO_TEST_CASE(a_generator_made_over_the_trainers_weights_generates_as_one_that_shared_them_after_loading_its_own) {
  const fs::path dir = fixtures / "sliding_only";
  auto trainer = train_engine(dir);
  BOOST_REQUIRE(trainer->train_cross_entropy({{1, 2, 3, 4, 5, 6}, {0, 6}}, 5).has_value());
  BOOST_REQUIRE(trainer->optimizer_step().has_value());  // weights the checkpoint does not hold
  auto made = tg::gemma4_generate_engine::create_sharing(test_context, open(dir, tg::dtype::float32), trainer->shared_weights(), {});
  BOOST_REQUIRE_MESSAGE(made.has_value(), (made.has_value() ? "" : made.error().message()));
  auto sharing = std::move(*made);
  BOOST_TEST(sharing->shares_weights());
  BOOST_TEST(sharing->weights_digest() == trainer->weights_digest());
  auto later = engine(dir);
  BOOST_REQUIRE(later->share_weights(trainer->shared_weights()).is_ok());
  const auto r = request(3, {8, 9, 10}, 6, {1.0, 0, 1.0});
  BOOST_REQUIRE(sharing->submit(std::span(&r, 1)).is_ok());
  BOOST_REQUIRE(later->submit(std::span(&r, 1)).is_ok());
  const auto a = run_all(*sharing).at(3), b = run_all(*later).at(3);
  BOOST_TEST(a.tokens == b.tokens);
  BOOST_TEST(std::memcmp(a.logprobs.data(), b.logprobs.data(), 4 * a.logprobs.size()) == 0);
  // A weight source of another layout is refused naming what differs, as share_weights refuses it.
  auto other = train_engine(fixtures / "full_only");
  const auto refused = tg::gemma4_generate_engine::create_sharing(test_context, open(dir, tg::dtype::float32), other->shared_weights(), {});
  BOOST_TEST(!refused.has_value());
}

BOOST_AUTO_TEST_CASE(bad_requests_are_refused_by_name_and_nothing_queued_is_lost) {
  auto e = engine(fixtures / "full_only");
  const auto good = request(1, {1, 2}, 3);
  BOOST_REQUIRE(e->submit(std::span(&good, 1)).is_ok());
  const auto refused = [&](const tg::generation_request& r) {
    const std::vector<tg::generation_request> batch{request(50, {3}, 2), r};
    const tg::status s = e->submit(batch);
    BOOST_TEST(e->waiting_count() == 1);  // neither request of the batch was queued
    return s.message();
  };
  BOOST_TEST(refused(request(2, {}, 3)) == "gemma4_generate_engine: submit: request 2: the prompt is empty");
  BOOST_TEST(refused(request(3, {1, 256}, 3)) ==
             "gemma4_generate_engine: submit: request 3: prompt token 1 is 256, outside the vocabulary [0, 256)");
  BOOST_TEST(refused(request(4, {1}, 5000)) ==
             "gemma4_generate_engine: submit: request 4: prompt (1) plus max_new_tokens (5000) exceeds max_sequence_length 4096");
  BOOST_TEST(refused(request(1, {1}, 2)) == "gemma4_generate_engine: submit: request 1: the id is already in use");
  BOOST_TEST(refused(request(5, {1}, 2, {-1.0, 0, 1.0})) ==
             "gemma4_generate_engine: submit: request 5: sampling: temperature must be >= 0 (0: greedy), got -1");
  auto stop = request(6, {1}, 2);
  stop.stop_tokens = {-3};
  BOOST_TEST(refused(stop) == "gemma4_generate_engine: submit: request 6: stop token -3 is outside the vocabulary [0, 256)");
  tg::gemma4_generate_options small;
  small.kv_block_size = 4;
  small.kv_cache_bytes = 1;
  BOOST_TEST(!tg::gemma4_generate_engine::create(test_context, open(fixtures / "full_only"), small).has_value());
  const auto done = run_all(*e);
  BOOST_TEST(done.at(1).tokens.size() == 3u);
}

#if TANDEM_TESTS_ON_CUDA
BOOST_AUTO_TEST_CASE(a_decode_step_on_cuda_waits_for_the_device_once_for_its_tokens) {
  for (const char* model : {"e2b_like", "all_features"}) {  // dense; MoE blocks (their counts stay on the device)
    for (const tg::dtype type : test_types) {
      BOOST_TEST_CONTEXT(model) {
        auto e = engine(fixtures / model, {}, type);
        std::vector<tg::generation_request> requests;
        for (std::uint64_t i = 0; i < 8; ++i)
          requests.push_back(request(i, {static_cast<std::int32_t>(3 + i), 9, 27}, 40, {0.7, 20, 0.9}));
        BOOST_REQUIRE(e->submit(requests).is_ok());
        for (int step = 0; step < 6; ++step) BOOST_REQUIRE(e->step().has_value());  // prompts in, buffers grown
        for (int step = 0; step < 10; ++step) {
          const std::int64_t rows = e->profile().rows, before = tg::host_waits();
          BOOST_REQUIRE(e->step().has_value());
          BOOST_TEST(e->profile().rows - rows == 8, "a decode step of the 8 sequences");
          BOOST_TEST(tg::host_waits() - before == 1, tg::to_string(type) << ", step " << step << ": "
                                                                         << tg::host_waits() - before << " waits");
        }
        BOOST_TEST(e->profile().captured_steps >= 10, tg::to_string(type) << ": decode steps replay their capture on CUDA");
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(the_cuda_engine_in_float32_continues_as_the_cpu_engine_within_float32_rounding) {
  // The fixtures' own prompts and greedy lengths: their references were drawn with clear margins
  // between the top tokens (and the MoE routers' top experts), so rounding cannot flip a choice.
  for (const auto& entry : fs::directory_iterator(fixtures)) {
    const fs::path dir = entry.path();
    if (!fs::is_regular_file(dir / "reference.json")) continue;
    const nlohmann::json ref = read_json(dir / "reference.json");
    const auto prompts = read_sequences(ref);
    const auto& greedy = ref.at("greedy");
    std::vector<tg::generation_request> requests;
    for (std::size_t s = 0; s < greedy.size(); ++s)
      requests.push_back(request(s, prompts.at(s), static_cast<std::int32_t>(greedy.at(s).size())));
    auto on_cuda = engine(dir);
    auto on_cpu = engine(dir, {}, tg::dtype::float32, tg::exec_context::cpu());
    BOOST_REQUIRE(on_cuda->submit(requests).is_ok());
    BOOST_REQUIRE(on_cpu->submit(requests).is_ok());
    const auto got = run_all(*on_cuda), want = run_all(*on_cpu);
    const std::string name = dir.filename().string();
    double worst = 0, sum = 0;
    std::size_t n = 0;
    for (const auto& r : requests) {
      BOOST_TEST(got.at(r.id).tokens == want.at(r.id).tokens, name << ", request " << r.id);
      const auto& a = got.at(r.id).logprobs;
      const auto& b = want.at(r.id).logprobs;
      for (std::size_t t = 0; t < std::min(a.size(), b.size()); ++t, ++n) {
        const double d = std::fabs(static_cast<double>(a[t]) - b[t]);
        worst = std::max(worst, d);
        sum += d;
      }
    }
    BOOST_TEST_MESSAGE(name << ": CUDA vs CPU float32 greedy logprobs, mean |delta| " << sum / static_cast<double>(std::max<std::size_t>(n, 1))
                            << ", max " << worst << " over " << n << " tokens");
    BOOST_TEST(worst < 1e-4, name << ": max |delta logprob| " << worst);
  }
}
#endif

BOOST_AUTO_TEST_SUITE_END()
