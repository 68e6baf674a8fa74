// The rollout worker over a fake generate engine: generation only with the live version, refits
// that become live at commit only, and every failure leaving the previous version live. Requests
// that need no refit group run on CAF's test coordinator; streams run on a real actor system, the
// worker's engine calls on their own thread and the policy root's side (send_stream) on a thread
// of the test, over a local refit group of two ranks.
#define CAF_SUITE rollout_worker
#include "actors/rollout_worker/rollout_worker.hpp"

#include <thread>

#include "actors/api/refit_stream.hpp"
#include "support/actor_fixture.hpp"
#include "support/tapped_group.hpp"

using namespace tandem;
using namespace tandem::test;

namespace {

generate_job job_for(weight_version version) {
  generate_job job;
  job.version = version;
  for (std::uint32_t s = 0; s < 3; ++s) {
    gpu::generation_request r;
    r.id = 10 + s;
    r.prompt = {3, 1, 4};
    r.rng = gpu::rng_coordinates{5, 0, 0, 0, s, 0};
    r.max_new_tokens = 4;
    job.requests.push_back(r);
  }
  return job;
}

struct fixture : cluster_fixture {
  fixture() { start({refit_mode::dedicated, 1}); }

  rollout_actor worker() const { return rollout[0]; }

  void check_manifest() {
    auto r = ask<manifest_accepted>(worker(), check_atom_v, manifest_check{trainer->manifest(), test_bucket_bytes});
    CAF_REQUIRE(r.value.has_value());
    CAF_REQUIRE_EQUAL(r.value->bucket_count, 3u);
  }
};

/// One rollout worker (engine calls on its own thread) as rank 1 of a local refit group whose
/// rank 0, the policy root, is driven by the test: root_streams() runs send_stream on a thread
/// while the worker is asked to stream.
struct stream_fixture {
  actor_test_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  std::shared_ptr<gpu::fake_train_engine> trainer = std::make_shared<gpu::fake_train_engine>(tiny_model());
  std::shared_ptr<gpu::fake_generate_engine> engine = std::make_shared<gpu::fake_generate_engine>(tiny_generator());
  std::shared_ptr<gpu::communicator> root;
  gpu::bucket_plan plan{trainer->manifest(), test_bucket_bytes};
  rollout_actor worker;

  /// `tap` sees the root's broadcasts (0 the opening, 1 + i bucket i's payload, 4 the closing);
  /// `receive`: how the worker's engine takes a refit.
  explicit stream_fixture(tap_function tap = {}, gpu::refit_receive receive = gpu::refit_receive::staging) {
    if (receive != gpu::refit_receive::staging) {
      gpu::fake_generate_options o = tiny_generator();
      o.receive = receive;
      engine = std::make_shared<gpu::fake_generate_engine>(o);
    }
    auto group = gpu::make_local_group(2);
    root = std::make_shared<tapped_communicator>(std::move(group[0]), std::move(tap));
    rollout_worker_config rc;
    rc.name = "rollout-0";
    rc.engine = engine;
    rc.manifest = gpu::fake_manifest(tiny_model());
    rc.execution = engine_execution::off_scheduler;
    rc.refit_group = std::move(group[1]);
    rc.refit_root = 0;
    worker = spawn_rollout_worker(sys, rc);
  }

  ~stream_fixture() { caf::anon_send_exit(worker, caf::exit_reason::user_shutdown); }

  template <class T, class... Ts>
  answer<T> ask(Ts&&... xs) {
    answer<T> out;
    self->request(worker, std::chrono::seconds(60), std::forward<Ts>(xs)...)
        .receive([&](T& x) { out.value = std::move(x); }, [&](caf::error& e) { out.error = std::move(e); });
    return out;
  }

  void check_manifest() {
    CAF_REQUIRE(ask<manifest_accepted>(check_atom_v, manifest_check{trainer->manifest(), test_bucket_bytes}).value.has_value());
  }

  /// Trains the policy's engine from v0 to v1 (its weights change).
  void train_to_v1() {
    gpu::train_micro_batch_data mb;  // one sequence of 4 tokens, 3 of them trained on
    mb.sequences.tokens = {1, 2, 3, 4};
    mb.sequences.offsets = {0, 4};
    mb.advantages = {1, 1, 1, 1};
    mb.mask = {0, 1, 1, 1};
    mb.lp_prev = {0, -4.2f, -4.2f, -4.2f};
    mb.lp_gen = {0, -4.2f, -4.2f, -4.2f};
    CAF_REQUIRE(trainer->train_step({mb}, {}, {3, 1}, {}).has_value());
  }

  /// stream(version) to the worker while the test's root sends every bucket; the worker's answer.
  answer<refit_ack> root_streams(weight_version version, bool checksums) {
    stream_outcome sent;
    std::thread sender([&] { sent = send_stream(*root, *trainer, plan, checksums); });
    auto out = ask<refit_ack>(stream_atom_v, stream_job{version, 3, test_bucket_bytes, checksums});
    sender.join();
    CAF_CHECK(sent.ok());
    return out;
  }

  /// A generate job for `version`, asked again while the worker is busy with an abort (which
  /// runs on the engine's thread after its answer).
  answer<generate_result> generate_after_abort(weight_version version) {
    answer<generate_result> g;
    for (int tries = 0; tries < 6000; ++tries) {
      g = ask<generate_result>(generate_atom_v, job_for(version));
      if (g.value || text_of(g.error) != "rollout-0: generate refused: busy with abort") break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return g;
  }

  /// A checked stream to v1 whose first bucket's import fails on the worker's engine: the
  /// worker's aborted ack.
  refit_ack stream_failing_at_import() {
    check_manifest();
    train_to_v1();
    engine->fail_next(gpu::fake_generate_operation::import_bucket);
    auto a = root_streams(1, true);
    CAF_REQUIRE(a.value.has_value());
    CAF_CHECK(a.value->stream.aborted);
    return *a.value;
  }

  weight_version live() {
    auto v = ask<weight_version>(version_atom_v);
    CAF_REQUIRE(v.value.has_value());
    return *v.value;
  }
};

/// A stream fixture whose root flips a byte of bucket 1 after taking its checksum.
struct corrupting_stream_fixture : stream_fixture {
  corrupting_stream_fixture()
      : stream_fixture([](int call, bool is_root, std::span<std::byte> data) {
          if (is_root && call % 5 == 2) data[17] ^= std::byte{0x40};  // 5 broadcasts a stream
        }) {}
};

/// A stream fixture whose worker's engine receives a refit over its live weights.
struct in_place_stream_fixture : stream_fixture {
  in_place_stream_fixture() : stream_fixture({}, gpu::refit_receive::in_place) {}
};

}  // namespace

CAF_TEST_FIXTURE_SCOPE(rollout_worker_tests, fixture)

CAF_TEST(a generate job for the live version returns the tokens of the weights of that version in request order) {
  const auto job = job_for(0);
  auto r = ask<generate_result>(worker(), generate_atom_v, job);
  CAF_REQUIRE(r.value.has_value());
  CAF_CHECK_EQUAL(r.value->worker, "rollout-0");
  CAF_REQUIRE_EQUAL(r.value->trajectories.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    const auto& t = r.value->trajectories[i];
    CAF_CHECK_EQUAL(t.id, job.requests[i].id);
    CAF_CHECK_EQUAL(t.weight_version, 0u);
    CAF_CHECK_EQUAL(t.sample_index, i);
    CAF_CHECK_EQUAL(t.prompt, job.requests[i].prompt);
    CAF_CHECK_EQUAL(t.tokens, gpu::fake_generate_engine::expected_tokens(trainer->weight_hash(), job.requests[i], 64));
    CAF_CHECK_EQUAL(t.logprobs.size(), t.tokens.size());
  }
}

CAF_TEST(a generate job for a stale version is refused with stale_version) {
  auto r = ask<generate_result>(worker(), generate_atom_v, job_for(1));
  CAF_REQUIRE(!r.value.has_value());
  CAF_CHECK(is_tandem_error(r.error, tandem_errc::stale_version));
  CAF_CHECK_EQUAL(text_of(r.error), "rollout-0: generate for v1 refused: v0 is live");
}

CAF_TEST(a manifest unlike the layout of the worker is refused) {
  auto other = trainer->manifest();
  other[2].shape = {7};
  auto r = ask<manifest_accepted>(worker(), check_atom_v, manifest_check{other, test_bucket_bytes});
  CAF_CHECK(is_tandem_error(r.error, tandem_errc::invalid_config));
  check_contains(text_of(r.error), "rollout-0: manifest refused: manifest entry 2");
}

CAF_TEST(a stream with engine calls inline is refused without taking part) {
  check_manifest();
  auto r = ask<refit_ack>(worker(), stream_atom_v, stream_job{1, 3, test_bucket_bytes, false});
  CAF_CHECK(is_tandem_error(r.error, tandem_errc::invalid_config));
  CAF_CHECK_EQUAL(text_of(r.error), "rollout-0: stream of v1 refused: engine calls run inline, and a stream's broadcasts "
                                    "wait for every rank of the refit group (streams need engine_execution::off_scheduler)");
  CAF_CHECK(!generators[0]->pending_version().has_value());
  CAF_CHECK_EQUAL(version_of(worker()), 0u);
}

CAF_TEST(a bump to a version not newer than the live one is refused with stale_version) {
  auto b = ask<refit_ack>(worker(), bump_atom_v, weight_version{0});
  CAF_CHECK(is_tandem_error(b.error, tandem_errc::stale_version));
  CAF_CHECK_EQUAL(text_of(b.error), "rollout-0: bump to v0 refused: v0 is live");
}

CAF_TEST(a commit or an abort with no update in progress changes nothing) {
  auto c = ask<refit_ack>(worker(), commit_atom_v, weight_version{1});
  CAF_CHECK(is_tandem_error(c.error, tandem_errc::wrong_state));
  CAF_CHECK_EQUAL(text_of(c.error), "rollout-0: commit v1 refused: no update in progress");
  auto a = ask<weight_version>(worker(), abort_atom_v, weight_version{1});
  CAF_CHECK(a.value == std::optional<weight_version>{0});
}

CAF_TEST_FIXTURE_SCOPE_END()

CAF_TEST_FIXTURE_SCOPE(rollout_worker_stream_tests, stream_fixture)

CAF_TEST(a streamed refit is staged with its checksums matched and becomes live at commit only) {
  check_manifest();
  const auto old_hash = engine->weight_hash();
  train_to_v1();
  auto a = root_streams(1, true);
  CAF_REQUIRE(a.value.has_value());
  CAF_CHECK(a.value->stage == refit_stage::stream);
  CAF_CHECK_EQUAL(a.value->version, 1u);
  CAF_CHECK_EQUAL(a.value->error, "");
  CAF_CHECK(!a.value->stream.aborted);
  CAF_CHECK(a.value->stream.checksums);
  CAF_CHECK_EQUAL(a.value->stream.checksums_matched, 3u);
  CAF_CHECK_EQUAL(live(), 0u);
  CAF_CHECK_EQUAL(engine->weight_hash(), old_hash);
  auto during = ask<generate_result>(generate_atom_v, job_for(0));
  CAF_CHECK(is_tandem_error(during.error, tandem_errc::wrong_state));
  CAF_CHECK_EQUAL(text_of(during.error), "rollout-0: generate refused: a refit to v1 is in progress");
  auto committed = ask<refit_ack>(commit_atom_v, weight_version{1});
  CAF_REQUIRE(committed.value.has_value());
  CAF_CHECK(committed.value->stage == refit_stage::commit);
  CAF_CHECK_EQUAL(live(), 1u);
  CAF_CHECK_EQUAL(engine->weight_hash(), trainer->weight_hash());
  auto after = ask<generate_result>(generate_atom_v, job_for(1));
  CAF_REQUIRE(after.value.has_value());
  CAF_CHECK_EQUAL(after.value->trajectories[0].weight_version, 1u);
  auto old = ask<generate_result>(generate_atom_v, job_for(0));
  CAF_CHECK_EQUAL(text_of(old.error), "rollout-0: generate for v0 refused: v1 is live");
}

CAF_TEST(an import failing mid-stream is in the ack and the previous version stays live) {
  const refit_ack a = stream_failing_at_import();
  CAF_CHECK(a.stream.failed_bucket == std::optional<std::size_t>{0});
  CAF_CHECK_EQUAL(a.error, "rollout-0: bucket 0 of v1: device_error: fake_generate_engine: injected failure in "
                           "import_bucket; update dropped, v0 stays live");
  CAF_CHECK_EQUAL(live(), 0u);
  CAF_CHECK(!engine->pending_version().has_value());
  // the update is gone: its commit is refused, generation with v0 works again, the next stream succeeds
  CAF_CHECK(is_tandem_error(ask<refit_ack>(commit_atom_v, weight_version{1}).error, tandem_errc::wrong_state));
  CAF_CHECK(ask<generate_result>(generate_atom_v, job_for(0)).value.has_value());
  auto again = root_streams(1, true);
  CAF_REQUIRE(again.value.has_value());
  CAF_CHECK(!again.value->stream.aborted);
}

CAF_TEST(abort drops a staged update and answers the live version) {
  check_manifest();
  train_to_v1();
  CAF_REQUIRE(root_streams(1, false).value.has_value());
  CAF_CHECK(engine->pending_version() == std::optional<std::uint64_t>{1});
  auto live_version = ask<weight_version>(abort_atom_v, weight_version{1});
  CAF_CHECK(live_version.value == std::optional<weight_version>{0});
  // generation with v0 is accepted once the abort is done
  const answer<generate_result> g = generate_after_abort(0);
  if (!g.value) CAF_FAIL("generate after the abort failed: " << text_of(g.error));
  CAF_CHECK(!engine->pending_version().has_value());
  auto commit = ask<refit_ack>(commit_atom_v, weight_version{1});
  CAF_CHECK(is_tandem_error(commit.error, tandem_errc::wrong_state));
  CAF_CHECK_EQUAL(text_of(commit.error), "rollout-0: commit v1 refused: no update in progress");
  CAF_CHECK_EQUAL(live(), 0u);
}

CAF_TEST(a stream needs a checked manifest and takes part all the same when refused) {
  train_to_v1();
  auto a = root_streams(1, false);  // the root completes its stream: the worker took part
  CAF_CHECK(is_tandem_error(a.error, tandem_errc::wrong_state));
  CAF_CHECK_EQUAL(text_of(a.error), "rollout-0: stream of v1 refused: no manifest checked");
  check_manifest();
  auto stale = root_streams(0, false);
  CAF_CHECK(is_tandem_error(stale.error, tandem_errc::stale_version));
  CAF_CHECK_EQUAL(text_of(stale.error), "rollout-0: stream of v0 refused: v0 is live");
  CAF_CHECK_EQUAL(live(), 0u);
}

CAF_TEST_FIXTURE_SCOPE_END()

CAF_TEST_FIXTURE_SCOPE(rollout_worker_corrupted_stream_tests, corrupting_stream_fixture)

CAF_TEST(a bucket corrupted in transit fails its checksum which the ack names and the previous version stays live) {
  check_manifest();
  const auto old_hash = engine->weight_hash();
  train_to_v1();
  auto a = root_streams(1, true);
  CAF_REQUIRE(a.value.has_value());
  const stream_result& r = a.value->stream;
  CAF_CHECK(r.aborted);
  CAF_CHECK(r.failed_bucket == std::optional<std::size_t>{1});
  CAF_CHECK(r.checksum_mismatch == std::optional<std::size_t>{1});
  CAF_CHECK_EQUAL(r.checksums_matched, 1u);
  CAF_CHECK_EQUAL(a.value->error,
                  "rollout-0: bucket 1 of v1: checksum mismatch (corrupted in transit); update dropped, v0 stays live");
  CAF_CHECK_EQUAL(to_string(*a.value), "refit_ack(rollout-0, v1, stream: aborted at bucket 1, 1 checksums matched, bucket 1 "
                                       "mismatched, error: rollout-0: bucket 1 of v1: checksum mismatch (corrupted in "
                                       "transit); update dropped, v0 stays live)");
  CAF_CHECK_EQUAL(live(), 0u);
  CAF_CHECK(!engine->pending_version().has_value());
  CAF_CHECK_EQUAL(engine->weight_hash(), old_hash);
  // the same stream without checksums is staged: the corruption goes unnoticed (debug integrity only)
  auto unchecked = root_streams(1, false);
  CAF_REQUIRE(unchecked.value.has_value());
  CAF_CHECK(!unchecked.value->stream.aborted);
  CAF_CHECK(!unchecked.value->stream.checksums);
}

CAF_TEST_FIXTURE_SCOPE_END()

CAF_TEST_FIXTURE_SCOPE(rollout_worker_in_place_stream_tests, in_place_stream_fixture)

CAF_TEST(an import failing mid-stream in place leaves the worker refusing to generate until a complete refit commits) {
  const refit_ack a = stream_failing_at_import();
  CAF_CHECK_EQUAL(a.error, "rollout-0: bucket 0 of v1: device_error: fake_generate_engine: injected failure in "
                           "import_bucket; update dropped, no weights are live until a complete refit (v1 was received in "
                           "place over v0)");
  CAF_CHECK_EQUAL(live(), 0u);
  CAF_CHECK(!engine->has_live_weights());
  auto refused = ask<generate_result>(generate_atom_v, job_for(0));
  CAF_CHECK(is_tandem_error(refused.error, tandem_errc::wrong_state));
  CAF_CHECK_EQUAL(text_of(refused.error), "rollout-0: generate refused: no weights are live (the refit to v1, received in "
                                          "place over v0, did not complete; a complete refit restores them)");
  // a complete refit brings the worker back
  auto again = root_streams(1, true);
  CAF_REQUIRE(again.value.has_value());
  CAF_CHECK(!again.value->stream.aborted);
  CAF_REQUIRE(ask<refit_ack>(commit_atom_v, weight_version{1}).value.has_value());
  CAF_CHECK_EQUAL(live(), 1u);
  CAF_CHECK(engine->has_live_weights());
  CAF_CHECK_EQUAL(engine->weight_hash(), trainer->weight_hash());
  auto after = ask<generate_result>(generate_atom_v, job_for(1));
  CAF_REQUIRE(after.value.has_value());
  CAF_CHECK_EQUAL(after.value->trajectories[0].weight_version, 1u);
}

CAF_TEST(an abort of a refit staged in place leaves the worker without weights) {
  check_manifest();
  train_to_v1();
  CAF_REQUIRE(root_streams(1, false).value.has_value());
  CAF_CHECK(ask<weight_version>(abort_atom_v, weight_version{1}).value == std::optional<weight_version>{0});
  const answer<generate_result> g = generate_after_abort(0);
  CAF_CHECK_EQUAL(text_of(g.error), "rollout-0: generate refused: no weights are live (the refit to v1, received in place "
                                    "over v0, did not complete; a complete refit restores them)");
  CAF_CHECK(!engine->has_live_weights());
}

CAF_TEST_FIXTURE_SCOPE_END()
