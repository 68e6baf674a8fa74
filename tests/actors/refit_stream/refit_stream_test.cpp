// Refits streamed over the data plane (bucket_route::data_plane, refit_stream.hpp) on a real actor
// system with engine calls off the scheduler: the policy root broadcasts every bucket to two
// rollout workers over a local refit group (policy rank 0, rollout ranks 1 and 2) while the refit
// coordinator only says "stream" and "commit". A corrupted bucket, an export failing mid-stream
// and refused streams end the stream on every rank (no hang) with the old version live. Waits
// use generous deadlines only.
#define CAF_SUITE refit_stream
#include "actors/api/refit_stream.hpp"

#include <atomic>
#include <functional>

#include "gpu/comm/local_group.h"
#include "support/actor_fixture.hpp"

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

/// What a tap sees: the index of the broadcast on this rank (0, 1, ...) and the root's buffer.
using tap_function = std::function<void(int call, std::span<std::byte> data)>;

/// A refit-group rank that hands every broadcast to the real one, calling `tap` first when this
/// rank is the root. A stream's broadcasts on the root: header 0, payload 0, header 1, payload 1, ...
class tapped_communicator final : public gpu::communicator {
 public:
  tapped_communicator(std::unique_ptr<gpu::communicator> inner, tap_function tap)
      : inner_(std::move(inner)), tap_(std::move(tap)) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  gpu::exec_context context() const override { return inner_->context(); }

 protected:
  gpu::status broadcast_raw(void* data, std::int64_t count, gpu::dtype type, int root) override {
    if (type != gpu::dtype::int32) return unsupported("broadcast of another type than int32");
    const std::span<std::int32_t> words(static_cast<std::int32_t*>(data), static_cast<std::size_t>(count));
    const int call = calls_++;
    if (rank() == root && tap_) tap_(call, std::as_writable_bytes(words));
    return inner_->broadcast(words, root);
  }
  gpu::status all_reduce_raw(void*, std::int64_t, gpu::dtype, gpu::reduce_op) override { return unsupported("all_reduce"); }
  gpu::status all_gather_raw(const void*, void*, std::int64_t, gpu::dtype) override { return unsupported("all_gather"); }
  gpu::status reduce_scatter_raw(const void*, void*, std::int64_t, gpu::dtype) override {
    return unsupported("reduce_scatter");
  }

 private:
  static gpu::status unsupported(const char* what) {
    return {gpu::status_code::unsupported, std::string("tapped_communicator: ") + what};
  }

  std::unique_ptr<gpu::communicator> inner_;
  tap_function tap_;
  int calls_ = 0;  // the root's engine executor only
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

  /// policy-0 (refit group rank 0, its broadcasts seen by `tap`), rollout-0 and rollout-1 (ranks
  /// 1 and 2) and a refit coordinator of the data-plane route.
  void spawn(tap_function tap = {}, bool checksums = false) {
    auto group = gpu::make_local_group(3);
    policy_worker_config pc;
    pc.name = "policy-0";
    pc.engine = trainer;
    pc.execution = engine_execution::off_scheduler;
    pc.refit_group = std::make_shared<tapped_communicator>(std::move(group[0]), std::move(tap));
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
      rc.refit_group = std::move(group[static_cast<std::size_t>(i) + 1]);
      rc.refit_root = 0;
      rollout.push_back(spawn_rollout_worker(sys, rc));
    }
    refit_coordinator_config cc;
    cc.policy = policy;
    cc.rollout = rollout;
    cc.bucket_bytes = stream_bucket_bytes;
    cc.checksums = checksums;
    cc.route = bucket_route::data_plane;
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
    answer<T> out;
    self->request(whom, deadline, std::forward<Ts>(xs)...)
        .receive([&](T& x) { out.value = std::move(x); }, [&](caf::error& e) { out.error = std::move(e); });
    return out;
  }

  void handshake() {
    auto r = ask<handshake_report>(coordinator, handshake_atom_v);
    if (!r.value.has_value()) CAF_FAIL("handshake failed: " << text_of(r.error));
    CAF_REQUIRE_EQUAL(r.value->bucket_count, 4u);
  }

  /// One optimizer step of the policy from `version`: its weights change.
  void train(weight_version version) {
    auto r = ask<train_report>(policy, train_atom_v, one_micro_batch(version));
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

  static stream_job job_for(weight_version version) { return {version, 4, stream_bucket_bytes, false}; }
};

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

/// Checks that `text` holds `part`; a failure prints both.
void check_contains(const std::string& text, const std::string& part) {
  if (contains(text, part)) {
    CAF_CHECK(true);
  } else {
    CAF_CHECK_EQUAL(text, "a text holding: " + part);
  }
}

}  // namespace

CAF_TEST_FIXTURE_SCOPE(refit_stream_tests, fixture)

CAF_TEST(a streamed refit makes the new weights of the policy live on every rollout worker) {
  spawn();
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

CAF_TEST(a bucket corrupted in transit fails the refit naming the bucket and keeps the old version live) {
  // flips one byte of the 2nd payload (bucket 1) on the root, after its checksum was taken
  spawn([](int call, std::span<std::byte> data) { if (call == 3) data[100] ^= std::byte{0x40}; }, true);
  handshake();
  const auto old_hashes = rollout_hashes();
  train(0);
  auto r = ask<refit_report>(coordinator, refit_atom_v, weight_version{1});
  CAF_REQUIRE(!r.value.has_value());
  CAF_CHECK(is_tandem_error(r.error, tandem_errc::invalid_config));
  check_contains(text_of(r.error), "bucket 1 of v1: checksum mismatch (corrupted in transit); update dropped, v0 stays live");
  check_contains(text_of(r.error), "v0 stays live on every rollout worker");
  CAF_CHECK_EQUAL(rollout_versions(), (std::vector<weight_version>{0, 0}));
  CAF_CHECK_EQUAL(rollout_hashes(), old_hashes);
  // the group stayed in step: the same refit again, uncorrupted, succeeds
  r = ask<refit_report>(coordinator, refit_atom_v, weight_version{1});
  if (!r.value.has_value()) CAF_FAIL("refit after the corruption failed: " << text_of(r.error));
  CAF_CHECK_EQUAL(rollout_versions(), (std::vector<weight_version>{1, 1}));
  CAF_CHECK_EQUAL(rollout_hashes(), (std::vector<std::uint64_t>{trainer->weight_hash(), trainer->weight_hash()}));
}

CAF_TEST(an export failing mid-stream aborts the stream on every rank and keeps the old version live) {
  // while payload 0 goes out, the export of bucket 1 is made to fail
  auto engine = trainer;
  spawn([engine](int call, std::span<std::byte>) { if (call == 1) engine->fail_next(gpu::fake_train_operation::export_bucket); });
  handshake();
  const auto old_hashes = rollout_hashes();
  train(0);
  auto r = ask<refit_report>(coordinator, refit_atom_v, weight_version{1});
  CAF_REQUIRE(!r.value.has_value());
  CAF_CHECK(is_tandem_error(r.error, tandem_errc::engine_failure));
  const std::string text = text_of(r.error);
  // the root's reason is the refit's (the receivers only heard "the root aborted the stream")
  check_contains(text, "policy rank 0 at stream: policy-0: stream of v1: bucket 1: device_error: "
                       "fake_train_engine: injected failure in export_bucket; the stream was aborted on the refit group");
  check_contains(text, "v0 stays live on every rollout worker");
  CAF_CHECK_EQUAL(rollout_versions(), (std::vector<weight_version>{0, 0}));
  CAF_CHECK_EQUAL(rollout_hashes(), old_hashes);
  // every rank left the stream: the next refit goes through
  r = ask<refit_report>(coordinator, refit_atom_v, weight_version{1});
  if (!r.value.has_value()) CAF_FAIL("refit after the failed export failed: " << text_of(r.error));
  CAF_CHECK_EQUAL(rollout_hashes(), (std::vector<std::uint64_t>{trainer->weight_hash(), trainer->weight_hash()}));
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
  {
    auto ps = self->request(policy, deadline, stream_atom_v, job_for(1));
    auto r0 = self->request(rollout[0], deadline, stream_atom_v, job_for(1));
    auto r1 = self->request(rollout[1], deadline, stream_atom_v, job_for(1));
    ps.receive([](stream_report&) { CAF_FAIL("the policy streamed a version it does not have"); },
               [](caf::error& e) {
                 CAF_CHECK(is_tandem_error(e, tandem_errc::stale_version));
                 CAF_CHECK_EQUAL(text_of(e), "policy-0: stream for v1 refused: the current version is v0");
               });
    auto stopped = [](refit_ack&) { CAF_FAIL("a receiver staged a stream its root refused"); };
    r0.receive(stopped, [](caf::error& e) {
      CAF_CHECK(is_tandem_error(e, tandem_errc::engine_failure));
      CAF_CHECK_EQUAL(text_of(e), "rollout-0: bucket 0 of v1: the policy root aborted the stream; update dropped, v0 stays live");
    });
    r1.receive(stopped, [](caf::error& e) { CAF_CHECK(is_tandem_error(e, tandem_errc::engine_failure)); });
  }
  // v0 is current on the policy but live on the receivers: they refuse it and take part all the same
  {
    auto ps = self->request(policy, deadline, stream_atom_v, job_for(0));
    auto r0 = self->request(rollout[0], deadline, stream_atom_v, job_for(0));
    auto r1 = self->request(rollout[1], deadline, stream_atom_v, job_for(0));
    ps.receive(
        [](stream_report& r) {
          CAF_CHECK_EQUAL(r.buckets, 4u);
          CAF_CHECK_EQUAL(r.bytes, std::int64_t{1} << 20);
        },
        [](caf::error& e) { CAF_FAIL("the policy's stream of v0 failed: " << text_of(e)); });
    auto refused = [](refit_ack&) { CAF_FAIL("a receiver staged the live version"); };
    r0.receive(refused, [](caf::error& e) {
      CAF_CHECK(is_tandem_error(e, tandem_errc::stale_version));
      CAF_CHECK_EQUAL(text_of(e), "rollout-0: stream of v0 refused: v0 is live");
    });
    r1.receive(refused, [](caf::error& e) { CAF_CHECK(is_tandem_error(e, tandem_errc::stale_version)); });
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
  auto ps = self->request(policy, deadline, stream_atom_v, wrong);
  auto r0 = self->request(rollout[0], deadline, stream_atom_v, wrong);
  auto r1 = self->request(rollout[1], deadline, stream_atom_v, wrong);
  ps.receive([](stream_report&) { CAF_FAIL("the policy streamed a plan it does not cut"); },
             [](caf::error& e) {
               CAF_CHECK(is_tandem_error(e, tandem_errc::invalid_config));
               CAF_CHECK_EQUAL(text_of(e),
                               "policy-0: stream of v1 refused: 5 buckets asked, the plan of 262144-byte buckets has 4");
             });
  auto refused = [](refit_ack&) { CAF_FAIL("a receiver staged a stream of another plan"); };
  r0.receive(refused, [](caf::error& e) {
    CAF_CHECK(is_tandem_error(e, tandem_errc::invalid_config));
    CAF_CHECK_EQUAL(text_of(e), "rollout-0: stream of v1 refused: 5 buckets of 262144 bytes, the checked plan cuts 4 of 262144");
  });
  r1.receive(refused, [](caf::error& e) { CAF_CHECK(is_tandem_error(e, tandem_errc::invalid_config)); });
  CAF_CHECK_EQUAL(rollout_versions(), (std::vector<weight_version>{0, 0}));
}

CAF_TEST_FIXTURE_SCOPE_END()
