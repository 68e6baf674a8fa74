// Refits streamed over the refit group (refit_stream.hpp), the only route weight bytes take, on a
// real actor system with engine calls off the scheduler: the policy root broadcasts every bucket
// as bytes to two rollout workers (policy rank 0, rollout ranks 1 and 2) while the refit
// coordinator only says "stream" and "commit". The wire schedule itself; a corrupted bucket, an
// export failing mid-stream, refused streams and a peer dying mid-stream end the stream on every
// rank (no hang) with the old version live, and each rollout worker's ack says how its stream
// ended. The refit group is a local_group, or a zmq_group over inproc:// where a peer must be able
// to leave. Waits use generous deadlines only.
#define CAF_SUITE refit_stream
#include "actors/api/refit_stream.hpp"

#include <array>
#include <atomic>
#include <cstring>
#include <thread>

#include <zmq.hpp>

#include "gpu/comm/local_group.h"
#include "gpu/comm/zmq_group.h"
#include "support/actor_fixture.hpp"
#include "support/tapped_group.hpp"

using namespace tandem;
using namespace tandem::test;

namespace {

constexpr auto deadline = std::chrono::seconds(60);

/// 1 MiB of weights cut into 4 buckets of 256 KiB.
constexpr std::int64_t stream_bucket_bytes = std::int64_t{256} << 10;

gpu::fake_model_options mib_model() {
  gpu::fake_model_options o = tiny_model();
  o.weight_bytes = std::int64_t{1} << 20;
  return o;
}

/// A refit group of `n` zmq_group ranks over inproc:// (joined on threads, as processes would),
/// with a short timeout so that a peer that left is noticed at once and a silent one soon.
std::vector<std::unique_ptr<gpu::communicator>> zmq_refit_group(int n) {
  static int groups = 0;
  gpu::zmq_group_options o;
  o.chunk_bytes = 64 << 10;
  o.timeout = std::chrono::seconds(5);
  auto context = std::make_shared<zmq::context_t>(1);
  std::vector<std::string> addresses;
  std::vector<std::optional<gpu::zmq_data_endpoint>> endpoints;
  for (int r = 0; r < n; ++r) {
    auto ep = gpu::bind_data_endpoint("inproc://refit_stream_test_" + std::to_string(groups) + "_" + std::to_string(r), o, context);
    CAF_REQUIRE(ep.has_value());
    addresses.push_back(ep->address());
    endpoints.emplace_back(std::move(*ep));
  }
  ++groups;
  std::vector<std::unique_ptr<gpu::communicator>> out(static_cast<std::size_t>(n));
  std::vector<std::string> errors(static_cast<std::size_t>(n));
  std::vector<std::thread> joins;
  for (int r = 0; r < n; ++r)
    joins.emplace_back([&, r] {
      const auto i = static_cast<std::size_t>(r);
      auto g = gpu::zmq_group::create(r, n, addresses, std::move(*endpoints[i]));
      if (g) out[i] = std::move(*g);
      else errors[i] = g.error().message();
    });
  for (auto& t : joins) t.join();
  for (const auto& e : errors) CAF_REQUIRE_EQUAL(e, "");
  return out;
}

/// How the fixture's refit group is made.
struct group_options {
  tap_function policy_tap;   ///< sees the policy root's broadcasts
  int policy_leaves_at = -1;  ///< the policy rank leaves the group at this broadcast
  int rollout_1_leaves_at = -1;  ///< rollout-1 (rank 2) leaves the group at this broadcast
  bool zmq = false;          ///< a zmq_group over inproc:// instead of a local_group
  bool checksums = false;
};

struct fixture {
  actor_test_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  std::shared_ptr<gpu::fake_train_engine> trainer = std::make_shared<gpu::fake_train_engine>(mib_model());
  std::vector<std::shared_ptr<gpu::fake_generate_engine>> generators;
  policy_actor policy;
  std::vector<rollout_actor> rollout;
  refit_coordinator_actor coordinator;

  /// policy-0 (refit group rank 0), rollout-0 and rollout-1 (ranks 1 and 2) and a refit coordinator.
  void spawn(group_options o = {}) {
    auto group = o.zmq ? zmq_refit_group(3) : gpu::make_local_group(3);
    policy_worker_config pc;
    pc.name = "policy-0";
    pc.engine = trainer;
    pc.execution = engine_execution::off_scheduler;
    pc.refit_group = std::make_shared<tapped_communicator>(std::move(group[0]), o.policy_tap, o.policy_leaves_at);
    policy = spawn_policy_worker(sys, pc);
    for (int i = 0; i < 2; ++i) {
      gpu::fake_generate_options go;
      go.model = mib_model();
      go.verify_checksums = false;  // the rollout worker checks checksums itself
      auto g = std::make_shared<gpu::fake_generate_engine>(go);
      CAF_REQUIRE(g->set_bucket_bytes(stream_bucket_bytes).is_ok());
      generators.push_back(g);
      rollout_worker_config rc;
      rc.name = "rollout-" + std::to_string(i);
      rc.engine = g;
      rc.manifest = gpu::fake_manifest(mib_model());
      rc.execution = engine_execution::off_scheduler;
      std::shared_ptr<gpu::communicator> rank = std::move(group[static_cast<std::size_t>(i) + 1]);
      if (i == 1 && o.rollout_1_leaves_at >= 0) rank = std::make_shared<tapped_communicator>(rank, tap_function{}, o.rollout_1_leaves_at);
      rc.refit_group = rank;
      rc.refit_root = 0;
      rollout.push_back(spawn_rollout_worker(sys, rc));
    }
    refit_coordinator_config cc;
    cc.policy = policy;
    cc.rollout = rollout;
    cc.bucket_bytes = stream_bucket_bytes;
    cc.checksums = o.checksums;
    cc.timeout = std::chrono::seconds(30);
    coordinator = spawn_refit_coordinator(sys, cc);
  }

  ~fixture() {
    for (auto& r : rollout) caf::anon_send_exit(r, caf::exit_reason::user_shutdown);
    if (policy) caf::anon_send_exit(policy, caf::exit_reason::user_shutdown);
    if (coordinator) caf::anon_send_exit(coordinator, caf::exit_reason::user_shutdown);
  }

  /// A request's answer or its error, within the deadline.
  template <class T, class Handle, class... Ts>
  answer<T> ask(const Handle& whom, Ts&&... xs) {
    return ask_within<T>(self, deadline, whom, std::forward<Ts>(xs)...);
  }

  void handshake() {
    auto r = ask<handshake_report>(coordinator, handshake_atom_v);
    if (!r.value.has_value()) CAF_FAIL("handshake failed: " << text_of(r.error));
    CAF_REQUIRE_EQUAL(r.value->bucket_count, 4u);
  }

  /// One train step of the policy from `version` (its logprob pass, then one optimizer step):
  /// its weights change.
  void train(weight_version version) {
    auto l = ask<logprobs_result>(policy, logprobs_atom_v, one_sequence_logprobs(version));
    if (!l.value.has_value()) CAF_FAIL("logprobs failed: " << text_of(l.error));
    auto r = ask<train_report>(policy, train_atom_v, one_sequence_train(version));
    if (!r.value.has_value()) CAF_FAIL("train failed: " << text_of(r.error));
  }

  std::vector<weight_version> rollout_versions() {
    std::vector<weight_version> out;
    for (auto& r : rollout) {
      auto v = ask<weight_version>(r, version_atom_v);
      CAF_REQUIRE(v.value.has_value());
      out.push_back(*v.value);
    }
    return out;
  }

  /// The rollout engines' weight hashes (read between engine calls: no call is in flight).
  std::vector<std::uint64_t> rollout_hashes() const {
    std::vector<std::uint64_t> out;
    for (auto& g : generators) out.push_back(g->weight_hash());
    return out;
  }

  /// stream(job) to the policy and both rollout workers at once, without the coordinator.
  struct stream_answers {
    answer<stream_report> policy;
    std::vector<answer<refit_ack>> rollout;
  };
  stream_answers stream_directly(const stream_job& job) {
    auto ps = self->request(policy, deadline, stream_atom_v, job);
    auto r0 = self->request(rollout[0], deadline, stream_atom_v, job);
    auto r1 = self->request(rollout[1], deadline, stream_atom_v, job);
    stream_answers out;
    out.rollout.resize(2);
    ps.receive([&](stream_report& r) { out.policy.value = r; }, [&](caf::error& e) { out.policy.error = e; });
    r0.receive([&](refit_ack& a) { out.rollout[0].value = a; }, [&](caf::error& e) { out.rollout[0].error = e; });
    r1.receive([&](refit_ack& a) { out.rollout[1].value = a; }, [&](caf::error& e) { out.rollout[1].error = e; });
    return out;
  }

  static stream_job job_for(weight_version version, bool checksums = false) {
    return {version, 4, stream_bucket_bytes, checksums};
  }
};

}  // namespace

CAF_TEST(a stream is an opening then the bytes of every bucket then a closing with the checksums) {
  // the root's side of a stream against a hand-made receiver reading the wire schedule itself
  auto engine = std::make_shared<gpu::fake_train_engine>(tiny_model());
  const gpu::bucket_plan plan(engine->manifest(), test_bucket_bytes);  // 96 + 96 + 64 bytes
  auto group = gpu::make_local_group(2);
  stream_outcome sent;
  std::thread root([&] { sent = send_stream(*group[0], *engine, plan, true); });
  std::array<std::byte, stream_opening_bytes> opening{};
  CAF_REQUIRE(group[1]->broadcast(std::span<std::byte>(opening), 0).is_ok());
  std::vector<std::vector<std::byte>> buckets;
  for (std::size_t i = 0; i < 3; ++i) {
    // a bucket travels as exactly its bytes: a receiver passing another count is refused
    buckets.emplace_back(static_cast<std::size_t>(plan.bucket_size(i)));
    CAF_REQUIRE(group[1]->broadcast(std::span<std::byte>(buckets.back()), 0).is_ok());
  }
  std::vector<std::byte> closing(16 + 3 * 8);
  CAF_REQUIRE(group[1]->broadcast(std::span<std::byte>(closing), 0).is_ok());
  root.join();
  CAF_CHECK(sent.ok());
  CAF_CHECK_EQUAL(sent.bytes, 256);
  const auto o = read_stream_opening(opening);
  CAF_REQUIRE(o.has_value());
  CAF_CHECK(!o->refused);
  CAF_CHECK_EQUAL(o->bucket_count, 3u);
  const auto weights = engine->weight_bytes();
  CAF_CHECK_EQUAL(buckets[0].size(), 96u);
  CAF_CHECK_EQUAL(buckets[2].size(), 64u);
  for (std::size_t i = 0; i < 3; ++i)
    CAF_CHECK(std::memcmp(buckets[i].data(), weights.data() + 96 * i, buckets[i].size()) == 0);
  std::uint64_t words[5];
  std::memcpy(words, closing.data(), sizeof words);
  CAF_CHECK_EQUAL(words[0], 0u);  // every bucket exported
  CAF_CHECK_EQUAL(words[1], 0u);
  for (std::size_t i = 0; i < 3; ++i) CAF_CHECK_EQUAL(words[2 + i], bucket_checksum(buckets[i]));
  // a refused stream is the opening alone
  gpu::status refused;
  std::thread refusing([&] { refused = refuse_stream(*group[0]); });
  CAF_REQUIRE(group[1]->broadcast(std::span<std::byte>(opening), 0).is_ok());
  refusing.join();
  CAF_CHECK(refused.is_ok());
  CAF_REQUIRE(read_stream_opening(opening).has_value());
  CAF_CHECK(read_stream_opening(opening)->refused);
  opening[0] ^= std::byte{1};
  CAF_CHECK(!read_stream_opening(opening).has_value());
}

CAF_TEST_FIXTURE_SCOPE(refit_stream_tests, fixture)

CAF_TEST(a streamed refit makes the new weights of the policy live on every rollout worker) {
  spawn({.policy_tap = {}, .checksums = true});
  handshake();
  const auto old_hash = trainer->weight_hash();
  train(0);
  CAF_REQUIRE_NOT_EQUAL(trainer->weight_hash(), old_hash);
  auto r = ask<refit_report>(coordinator, refit_atom_v, weight_version{1});
  if (!r.value.has_value()) CAF_FAIL("refit failed: " << text_of(r.error));
  CAF_CHECK_EQUAL(r.value->version, 1u);
  CAF_CHECK_EQUAL(r.value->rollout_workers, 2u);
  CAF_CHECK_EQUAL(r.value->buckets, 4u);
  CAF_CHECK_EQUAL(r.value->bytes, std::int64_t{1} << 20);
  CAF_CHECK(r.value->checksums);
  CAF_CHECK_EQUAL(r.value->dropped_acks, 0u);
  CAF_CHECK_EQUAL(rollout_versions(), (std::vector<weight_version>{1, 1}));
  CAF_CHECK_EQUAL(rollout_hashes(), (std::vector<std::uint64_t>{trainer->weight_hash(), trainer->weight_hash()}));
  // and the next one
  train(1);
  r = ask<refit_report>(coordinator, refit_atom_v, weight_version{2});
  if (!r.value.has_value()) CAF_FAIL("second refit failed: " << text_of(r.error));
  CAF_CHECK_EQUAL(rollout_versions(), (std::vector<weight_version>{2, 2}));
  CAF_CHECK_EQUAL(rollout_hashes(), (std::vector<std::uint64_t>{trainer->weight_hash(), trainer->weight_hash()}));
}

CAF_TEST(a stream ack carries the checksum results of every bucket) {
  spawn();
  handshake();
  train(0);
  auto a = stream_directly(job_for(1, true));
  CAF_REQUIRE(a.policy.value.has_value());
  for (std::size_t i = 0; i < 2; ++i) {
    CAF_REQUIRE(a.rollout[i].value.has_value());
    const refit_ack& ack = *a.rollout[i].value;
    CAF_CHECK(ack.stage == refit_stage::stream);
    CAF_CHECK_EQUAL(ack.error, "");
    CAF_CHECK(!ack.stream.aborted);
    CAF_CHECK(ack.stream.checksums);
    CAF_CHECK_EQUAL(ack.stream.checksums_matched, 4u);
    CAF_CHECK(!ack.stream.checksum_mismatch.has_value());
  }
  // staged, not live: the commit makes it live
  CAF_CHECK_EQUAL(rollout_versions(), (std::vector<weight_version>{0, 0}));
  for (auto& r : rollout) CAF_CHECK(ask<refit_ack>(r, commit_atom_v, weight_version{1}).value.has_value());
  CAF_CHECK_EQUAL(rollout_hashes(), (std::vector<std::uint64_t>{trainer->weight_hash(), trainer->weight_hash()}));
}

CAF_TEST(a bucket corrupted in transit is named in the ack and the refit fails with the old version live) {
  // flips one byte of the payload of bucket 1 on the root, after its checksum was taken, in every
  // stream (6 broadcasts each: the opening, 4 payloads, the closing)
  spawn({.policy_tap = [](int call, bool root, std::span<std::byte> data) { if (root && call % 6 == 2) data[100] ^= std::byte{0x40}; },
         .checksums = true});
  handshake();
  const auto old_hashes = rollout_hashes();
  train(0);
  auto a = stream_directly(job_for(1, true));
  CAF_CHECK(a.policy.value.has_value());  // the root did its part
  for (std::size_t i = 0; i < 2; ++i) {
    CAF_REQUIRE(a.rollout[i].value.has_value());  // the outcome is the ack, not an error
    const refit_ack& ack = *a.rollout[i].value;
    CAF_CHECK(ack.stream.aborted);
    CAF_CHECK(ack.stream.failed_bucket == std::optional<std::size_t>{1});
    CAF_CHECK(ack.stream.checksum_mismatch == std::optional<std::size_t>{1});
    CAF_CHECK_EQUAL(ack.stream.checksums_matched, 1u);
    CAF_CHECK_EQUAL(ack.error, "rollout-" + std::to_string(i) +
                                   ": bucket 1 of v1: checksum mismatch (corrupted in transit); update dropped, v0 stays live");
    CAF_CHECK(!generators[i]->pending_version().has_value());
  }
  // through the coordinator: the refit fails naming the worker (whichever acked first) and the bucket
  auto r = ask<refit_report>(coordinator, refit_atom_v, weight_version{1});
  CAF_REQUIRE(!r.value.has_value());
  CAF_CHECK(is_tandem_error(r.error, tandem_errc::invalid_config));
  const std::string text = text_of(r.error);
  const std::string worker = text.find("failed: rollout-1") != std::string::npos ? "rollout-1" : "rollout-0";
  check_contains(text, "refit to v1 failed: " + worker + " at stream: " + worker +
                           ": bucket 1 of v1: checksum mismatch (corrupted in transit); update dropped, v0 stays live");
  check_contains(text_of(r.error), "v0 stays live on every rollout worker");
  CAF_CHECK_EQUAL(rollout_versions(), (std::vector<weight_version>{0, 0}));
  CAF_CHECK_EQUAL(rollout_hashes(), old_hashes);
}

CAF_TEST(after a corrupted bucket the group stays in step and the same refit succeeds uncorrupted) {
  auto corrupt = std::make_shared<std::atomic<bool>>(true);
  spawn({.policy_tap =
             [corrupt](int call, bool root, std::span<std::byte> data) {
               if (root && *corrupt && call % 6 == 2) data[100] ^= std::byte{0x40};
             },
         .checksums = true});
  handshake();
  train(0);
  auto r = ask<refit_report>(coordinator, refit_atom_v, weight_version{1});
  CAF_REQUIRE(!r.value.has_value());
  *corrupt = false;
  r = ask<refit_report>(coordinator, refit_atom_v, weight_version{1});
  if (!r.value.has_value()) CAF_FAIL("refit after the corruption failed: " << text_of(r.error));
  CAF_CHECK_EQUAL(rollout_versions(), (std::vector<weight_version>{1, 1}));
  CAF_CHECK_EQUAL(rollout_hashes(), (std::vector<std::uint64_t>{trainer->weight_hash(), trainer->weight_hash()}));
}

CAF_TEST(an export failing mid-stream aborts the stream on every rank and keeps the old version live) {
  // while payload 0 goes out, the export of bucket 1 is made to fail
  auto engine = trainer;
  spawn({.policy_tap = [engine](int call, bool root, std::span<std::byte>) {
    if (root && call == 1) engine->fail_next(gpu::fake_train_operation::export_bucket);
  }});
  handshake();
  const auto old_hashes = rollout_hashes();
  train(0);
  auto a = stream_directly(job_for(1));
  CAF_REQUIRE(!a.policy.value.has_value());
  CAF_CHECK_EQUAL(text_of(a.policy.error), "policy-0: stream of v1: bucket 1: device_error: fake_train_engine: injected "
                                           "failure in export_bucket; the stream's closing told the receivers");
  for (std::size_t i = 0; i < 2; ++i) {
    CAF_REQUIRE(a.rollout[i].value.has_value());
    CAF_CHECK(a.rollout[i].value->stream.aborted);
    CAF_CHECK(a.rollout[i].value->stream.failed_bucket == std::optional<std::size_t>{1});
    CAF_CHECK_EQUAL(a.rollout[i].value->error,
                    "rollout-" + std::to_string(i) +
                        ": bucket 1 of v1: the policy root aborted the stream (its export of bucket 1 failed); update "
                        "dropped, v0 stays live");
  }
  // through the coordinator: the root's reason is the refit's (the receivers only heard it stop)
  engine->fail_next(gpu::fake_train_operation::export_bucket);  // now bucket 0
  auto r = ask<refit_report>(coordinator, refit_atom_v, weight_version{1});
  CAF_REQUIRE(!r.value.has_value());
  CAF_CHECK(is_tandem_error(r.error, tandem_errc::engine_failure));
  check_contains(text_of(r.error), "policy rank 0 at stream: policy-0: stream of v1: bucket 0: device_error: "
                                   "fake_train_engine: injected failure in export_bucket");
  check_contains(text_of(r.error), "v0 stays live on every rollout worker");
  CAF_CHECK_EQUAL(rollout_versions(), (std::vector<weight_version>{0, 0}));
  CAF_CHECK_EQUAL(rollout_hashes(), old_hashes);
  // every rank left the stream: the next refit goes through
  r = ask<refit_report>(coordinator, refit_atom_v, weight_version{1});
  if (!r.value.has_value()) CAF_FAIL("refit after the failed export failed: " << text_of(r.error));
  CAF_CHECK_EQUAL(rollout_hashes(), (std::vector<std::uint64_t>{trainer->weight_hash(), trainer->weight_hash()}));
}

CAF_TEST(an import failing mid-stream is named in the ack and drops the update of that worker) {
  spawn();
  handshake();
  train(0);
  generators[1]->fail_next(gpu::fake_generate_operation::import_bucket);
  auto r = ask<refit_report>(coordinator, refit_atom_v, weight_version{1});
  CAF_REQUIRE(!r.value.has_value());
  CAF_CHECK(is_tandem_error(r.error, tandem_errc::engine_failure));
  check_contains(text_of(r.error), "rollout-1 at stream: rollout-1: bucket 0 of v1: device_error: fake_generate_engine: "
                                   "injected failure in import_bucket; update dropped, v0 stays live");
  check_contains(text_of(r.error), "v0 stays live on every rollout worker");
  CAF_CHECK_EQUAL(rollout_versions(), (std::vector<weight_version>{0, 0}));
  for (const auto& g : generators) CAF_CHECK(!g->pending_version().has_value());
}

CAF_TEST(a rollout worker dying mid-stream aborts the refit on every rank without a hang) {
  // rollout-1 (rank 2 of a zmq_group) leaves the group at the payload of bucket 1
  spawn({.policy_tap = {}, .rollout_1_leaves_at = 2, .zmq = true});
  handshake();
  const auto old_hashes = rollout_hashes();
  train(0);
  auto r = ask<refit_report>(coordinator, refit_atom_v, weight_version{1});
  CAF_REQUIRE(!r.value.has_value());
  CAF_CHECK(is_tandem_error(r.error, tandem_errc::engine_failure));
  const std::string text = text_of(r.error);
  check_contains(text, "refit to v1 failed: policy rank 0 at stream: policy-0: stream of v1");
  check_contains(text, "rank 2 left the group");
  check_contains(text, "v0 stays live on every rollout worker");
  CAF_CHECK_EQUAL(rollout_versions(), (std::vector<weight_version>{0, 0}));
  CAF_CHECK_EQUAL(rollout_hashes(), old_hashes);
  for (const auto& g : generators) CAF_CHECK(!g->pending_version().has_value());
  // the group is broken: the next refit fails at once instead of waiting for the dead peer
  r = ask<refit_report>(coordinator, refit_atom_v, weight_version{1});
  CAF_REQUIRE(!r.value.has_value());
  check_contains(text_of(r.error), "broken by an earlier failure");
  CAF_CHECK_EQUAL(rollout_versions(), (std::vector<weight_version>{0, 0}));
}

CAF_TEST(the policy root dying mid-stream aborts the refit and every receiver says so in its ack) {
  spawn({.policy_tap = {}, .policy_leaves_at = 2, .zmq = true});
  handshake();
  const auto old_hashes = rollout_hashes();
  train(0);
  auto a = stream_directly(job_for(1));
  CAF_REQUIRE(!a.policy.value.has_value());
  check_contains(text_of(a.policy.error), "policy-0: stream of v1: bucket 1: payload: io_error: rank 0 left the group at "
                                          "its broadcast 2 (a peer dying mid-stream)");
  for (std::size_t i = 0; i < 2; ++i) {
    CAF_REQUIRE(a.rollout[i].value.has_value());
    const refit_ack& ack = *a.rollout[i].value;
    CAF_CHECK(ack.stream.aborted);
    CAF_CHECK(ack.stream.failed_bucket == std::optional<std::size_t>{1});
    check_contains(ack.error, "rollout-" + std::to_string(i) + ": bucket 1 of v1: transport: payload: io_error: ");
    check_contains(ack.error, "rank 0 left the group");
    check_contains(ack.error, "update dropped, v0 stays live");
  }
  CAF_CHECK_EQUAL(rollout_versions(), (std::vector<weight_version>{0, 0}));
  CAF_CHECK_EQUAL(rollout_hashes(), old_hashes);
  for (const auto& g : generators) CAF_CHECK(!g->pending_version().has_value());
}

CAF_TEST(a stream is refused without a refit group) {
  policy_worker_config pc;
  pc.name = "policy-lone";
  pc.engine = trainer;
  auto lone_policy = spawn_policy_worker(sys, pc);
  auto p = ask<stream_report>(lone_policy, stream_atom_v, job_for(0));
  CAF_CHECK(is_tandem_error(p.error, tandem_errc::invalid_config));
  CAF_CHECK_EQUAL(text_of(p.error), "policy-lone: stream of v0 refused: no refit group");
  rollout_worker_config rc;
  rc.name = "rollout-lone";
  rc.engine = std::make_shared<gpu::fake_generate_engine>(gpu::fake_generate_options{mib_model(), 8, stream_bucket_bytes, false});
  rc.manifest = gpu::fake_manifest(mib_model());
  auto lone_rollout = spawn_rollout_worker(sys, rc);
  auto a = ask<refit_ack>(lone_rollout, stream_atom_v, job_for(1));
  CAF_CHECK(is_tandem_error(a.error, tandem_errc::invalid_config));
  CAF_CHECK_EQUAL(text_of(a.error), "rollout-lone: stream of v1 refused: no refit group");
  caf::anon_send_exit(lone_policy, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(lone_rollout, caf::exit_reason::user_shutdown);
}

CAF_TEST(a stale stream is refused on every rank that finds it stale and the group stays in step) {
  spawn();
  handshake();
  // the policy is still on v0: it refuses v1 and tells the receivers, which began v1, to stop
  auto a = stream_directly(job_for(1));
  CAF_REQUIRE(!a.policy.value.has_value());
  CAF_CHECK(is_tandem_error(a.policy.error, tandem_errc::stale_version));
  CAF_CHECK_EQUAL(text_of(a.policy.error), "policy-0: stream for v1 refused: the current version is v0");
  for (std::size_t i = 0; i < 2; ++i) {
    CAF_REQUIRE(a.rollout[i].value.has_value());
    CAF_CHECK(a.rollout[i].value->stream.aborted);
    CAF_CHECK(!a.rollout[i].value->stream.failed_bucket.has_value());
    CAF_CHECK_EQUAL(a.rollout[i].value->error, "rollout-" + std::to_string(i) +
                                                   ": stream of v1: the policy root refused the stream; update "
                                                   "dropped, v0 stays live");
  }
  // v0 is current on the policy but live on the receivers: they refuse it and take part all the same
  a = stream_directly(job_for(0));
  CAF_REQUIRE(a.policy.value.has_value());
  CAF_CHECK_EQUAL(a.policy.value->buckets, 4u);
  CAF_CHECK_EQUAL(a.policy.value->bytes, std::int64_t{1} << 20);
  for (std::size_t i = 0; i < 2; ++i) {
    CAF_CHECK(is_tandem_error(a.rollout[i].error, tandem_errc::stale_version));
    CAF_CHECK_EQUAL(text_of(a.rollout[i].error), "rollout-" + std::to_string(i) + ": stream of v0 refused: v0 is live");
  }
  // through the coordinator: a refit to a version the policy does not have fails everywhere
  auto r = ask<refit_report>(coordinator, refit_atom_v, weight_version{1});
  CAF_REQUIRE(!r.value.has_value());
  CAF_CHECK(is_tandem_error(r.error, tandem_errc::stale_version));
  check_contains(text_of(r.error), "policy rank 0 at stream: policy-0: stream for v1 refused: the current version is v0");
  check_contains(text_of(r.error), "v0 stays live on every rollout worker");
  CAF_CHECK_EQUAL(rollout_versions(), (std::vector<weight_version>{0, 0}));
  // and then, trained to v1, the refit goes through
  train(0);
  auto ok = ask<refit_report>(coordinator, refit_atom_v, weight_version{1});
  if (!ok.value.has_value()) CAF_FAIL("refit after the refusals failed: " << text_of(ok.error));
  CAF_CHECK_EQUAL(rollout_hashes(), (std::vector<std::uint64_t>{trainer->weight_hash(), trainer->weight_hash()}));
}

CAF_TEST(a stream whose bucket count differs from the plan is refused with invalid_config on every rank) {
  spawn();
  handshake();
  train(0);
  stream_job wrong = job_for(1);
  wrong.bucket_count = 5;
  auto a = stream_directly(wrong);
  CAF_CHECK(is_tandem_error(a.policy.error, tandem_errc::invalid_config));
  CAF_CHECK_EQUAL(text_of(a.policy.error), "policy-0: stream of v1 refused: 5 buckets asked, the plan of 262144-byte buckets has 4");
  for (std::size_t i = 0; i < 2; ++i) {
    CAF_CHECK(is_tandem_error(a.rollout[i].error, tandem_errc::invalid_config));
    CAF_CHECK_EQUAL(text_of(a.rollout[i].error), "rollout-" + std::to_string(i) +
                                                     ": stream of v1 refused: 5 buckets of 262144 bytes, the checked "
                                                     "plan cuts 4 of 262144");
  }
  CAF_CHECK_EQUAL(rollout_versions(), (std::vector<weight_version>{0, 0}));
}

CAF_TEST_FIXTURE_SCOPE_END()
