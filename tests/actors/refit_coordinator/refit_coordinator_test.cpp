// The refit coordinator on CAF's test coordinator: the handshake once, stale acks dropped and
// counted, a refit failing mid-way aborted everywhere with the old version live, and silent or
// lagging rollout workers named when virtual time passes the deadline.
#define CAF_SUITE refit_coordinator
#include "actors/refit_coordinator/refit_coordinator.hpp"

#include "support/actor_fixture.hpp"

using namespace tandem;
using namespace tandem::test;

namespace {

/// How a scripted rollout worker misbehaves at begin.
enum class misbehaviour {
  old_version_ack,  ///< answers begin(v) with an ack for v - 1
  silent,           ///< never answers begin or abort
};

struct scripted_state {
  static inline const char* name = "scripted_rollout";
  std::vector<caf::typed_response_promise<refit_ack>> held;  // begin requests never answered
  std::vector<caf::typed_response_promise<weight_version>> held_aborts;
};

/// A rollout worker (same interface) that accepts the manifest and then misbehaves.
rollout_actor::behavior_type scripted_rollout(rollout_actor::stateful_pointer<scripted_state> self, std::string name,
                                              misbehaviour how) {
  auto refuse = [name](const char* what) { return tandem_error(tandem_errc::wrong_state, name + ": " + what); };
  return {
      [refuse](generate_atom, generate_job&) -> caf::result<generate_result> { return refuse("generate"); },
      [name](check_atom, const manifest_check& m) -> caf::result<manifest_accepted> {
        gpu::bucket_plan plan(m.manifest, m.bucket_bytes);
        return manifest_accepted{name, 0, plan.bucket_count(), plan.total_bytes()};
      },
      [self, name, how](begin_atom, weight_version v) -> caf::result<refit_ack> {
        if (how == misbehaviour::old_version_ack) return refit_ack{name, v - 1, refit_stage::begin, 0, {}};
        auto rp = self->make_response_promise<refit_ack>();
        self->state.held.push_back(rp);
        return rp;
      },
      [refuse](bucket_atom, const weight_bucket&) -> caf::result<refit_ack> { return refuse("bucket"); },
      [refuse](stream_atom, const stream_job&) -> caf::result<refit_ack> { return refuse("stream"); },
      [refuse](commit_atom, weight_version) -> caf::result<refit_ack> { return refuse("commit"); },
      [self, how](abort_atom, weight_version) -> caf::result<weight_version> {
        if (how == misbehaviour::old_version_ack) return weight_version{0};
        auto rp = self->make_response_promise<weight_version>();
        self->state.held_aborts.push_back(rp);
        return rp;
      },
      [refuse](bump_atom, weight_version) -> caf::result<refit_ack> { return refuse("bump"); },
      [](version_atom) { return weight_version{0}; },
  };
}

struct fixture : cluster_fixture {
  fixture() { start({refit_mode::dedicated, 2}); }

  /// A second coordinator over rollout-0 and `other`.
  refit_coordinator_actor coordinator_with(const rollout_actor& other) {
    refit_coordinator_config cc;
    cc.policy = policy;
    cc.rollout = {rollout[0], other};
    cc.bucket_bytes = test_bucket_bytes;
    cc.timeout = std::chrono::seconds(30);
    auto c = spawn_refit_coordinator(sys, cc);
    extra.push_back(caf::actor_cast<caf::actor>(c));
    extra.push_back(caf::actor_cast<caf::actor>(other));
    return c;
  }

  ~fixture() override {
    for (auto& a : extra) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  }

  /// True when a message waits in `whom`'s mailbox.
  template <class Handle>
  static bool has_mail(const Handle& whom) {
    return caf::actor_cast<caf::abstract_actor*>(whom)->peek_at_next_mailbox_element() != nullptr;
  }

  /// Trains the policy from v0 to v1.
  void train_to_v1() { CAF_REQUIRE(ask<train_report>(policy, train_atom_v, one_micro_batch(0)).value.has_value()); }

  std::vector<caf::actor> extra;
};

}  // namespace

CAF_TEST_FIXTURE_SCOPE(refit_coordinator_tests, fixture)

CAF_TEST(the handshake fetches the manifest once and has every rollout worker check it) {
  auto h = self->request(coordinator, caf::infinite, handshake_atom_v);
  expect((handshake_atom), from(self).to(coordinator));
  expect((manifest_atom), from(coordinator).to(policy));
  expect((manifest_reply), from(policy).to(coordinator));
  expect((check_atom, manifest_check), from(coordinator).to(rollout[0]));
  expect((check_atom, manifest_check), from(coordinator).to(rollout[1]));
  expect((manifest_accepted), from(rollout[0]).to(coordinator));
  expect((manifest_accepted), from(rollout[1]).to(coordinator));
  h.receive(
      [](handshake_report& r) {
        CAF_CHECK_EQUAL(r.version, 0u);
        CAF_CHECK_EQUAL(r.bucket_count, 3u);
        CAF_CHECK_EQUAL(r.total_bytes, 256);
        CAF_CHECK_EQUAL(r.rollout_workers, (std::vector<std::string>{"rollout-0", "rollout-1"}));
      },
      [](caf::error& e) { CAF_FAIL("handshake failed: " << text_of(e)); });
  auto again = ask<handshake_report>(coordinator, handshake_atom_v);
  CAF_CHECK(is_tandem_error(again.error, tandem_errc::wrong_state));
  CAF_CHECK_EQUAL(text_of(again.error), "refit coordinator: handshake refused: already done");
}

CAF_TEST(a refit before the handshake is refused with wrong_state) {
  auto r = ask<refit_report>(coordinator, refit_atom_v, weight_version{1});
  CAF_CHECK(is_tandem_error(r.error, tandem_errc::wrong_state));
  CAF_CHECK_EQUAL(text_of(r.error), "refit coordinator: refit refused: no handshake yet");
}

CAF_TEST(a manifest a rollout worker refuses fails the handshake naming the difference) {
  auto other_model = tiny_model();
  other_model.tensors = 5;
  rollout_worker_config rc;
  rc.name = "rollout-odd";
  rc.engine = std::make_shared<gpu::fake_generate_engine>(tiny_generator());
  rc.manifest = gpu::fake_manifest(other_model);
  rc.execution = engine_execution::inline_calls;
  auto c = coordinator_with(spawn_rollout_worker(sys, rc));
  sched.run();
  auto r = ask<handshake_report>(c, handshake_atom_v);
  CAF_REQUIRE(!r.value.has_value());
  CAF_CHECK(is_tandem_error(r.error, tandem_errc::invalid_config));
  CAF_CHECK_NOT_EQUAL(text_of(r.error).find("rollout-odd: manifest refused: manifest entry 0"), std::string::npos);
  // back to idle: a refit is still refused, a corrected handshake could follow
  auto refit = ask<refit_report>(c, refit_atom_v, weight_version{1});
  CAF_CHECK_EQUAL(text_of(refit.error), "refit coordinator: refit refused: no handshake yet");
}

CAF_TEST(a refit to a version not newer than the live one is refused with stale_version) {
  handshake();
  auto r = ask<refit_report>(coordinator, refit_atom_v, weight_version{0});
  CAF_CHECK(is_tandem_error(r.error, tandem_errc::stale_version));
  CAF_CHECK_EQUAL(text_of(r.error), "refit coordinator: refit to v0 refused: v0 is live");
}

CAF_TEST(acks of an old version or of a worker that already acked or of a stranger are dropped and counted) {
  handshake();
  train_to_v1();
  auto h = self->request(coordinator, caf::infinite, refit_atom_v, weight_version{1});
  expect((refit_atom, weight_version), from(self).to(coordinator));
  // begin(v1) is on its way to both workers; acks of v0 and a stranger's reach the coordinator first
  self->send(coordinator, refit_ack{"rollout-0", 0, refit_stage::begin, 0, {}});
  self->send(coordinator, refit_ack{"rollout-1", 0, refit_stage::begin, 0, {}});
  self->send(coordinator, refit_ack{"rollout-7", 1, refit_stage::begin, 0, {}});
  expect((refit_ack), from(self).to(coordinator));
  expect((refit_ack), from(self).to(coordinator));
  expect((refit_ack), from(self).to(coordinator));
  CAF_CHECK(!has_mail(policy));  // the begin stage did not end: no bucket exported yet
  expect((begin_atom, weight_version), from(coordinator).to(rollout[0]).with(_, weight_version{1}));
  expect((refit_ack), from(rollout[0]).to(coordinator));
  // rollout-0 acked begin already: the same ack again is a duplicate
  self->send(coordinator, refit_ack{"rollout-0", 1, refit_stage::begin, 0, {}});
  expect((refit_ack), from(self).to(coordinator));
  CAF_CHECK(!has_mail(policy));  // still waiting for rollout-1
  expect((begin_atom, weight_version), from(coordinator).to(rollout[1]).with(_, weight_version{1}));
  expect((refit_ack), from(rollout[1]).to(coordinator));
  expect((export_atom, export_job), from(coordinator).to(policy));
  sched.run();
  h.receive(
      [](refit_report& r) {
        CAF_CHECK_EQUAL(r.version, 1u);
        CAF_CHECK_EQUAL(r.dropped_acks, 4u);
        CAF_CHECK_EQUAL(r.buckets, 3u);
      },
      [](caf::error& e) { CAF_FAIL("the refit failed: " << text_of(e)); });
  CAF_CHECK_EQUAL(rollout_versions(), (std::vector<weight_version>{1, 1}));
}

CAF_TEST(an ack a worker answers with an old version is ignored and the stage deadline names the worker) {
  auto c = coordinator_with(sys.spawn(scripted_rollout, std::string("laggard"), misbehaviour::old_version_ack));
  sched.run();
  CAF_REQUIRE(ask<handshake_report>(c, handshake_atom_v).value.has_value());
  train_to_v1();
  auto h = self->request(c, caf::infinite, refit_atom_v, weight_version{1});
  sched.run();
  // the laggard answered begin(v1) with an ack for v0: ignored, so the refit still waits
  CAF_CHECK(generators[0]->pending_version() == std::optional<std::uint64_t>{1});
  advance_time(std::chrono::seconds(30));
  sched.run();
  h.receive([](refit_report&) { CAF_FAIL("the refit succeeded"); },
            [](caf::error& e) {
              CAF_CHECK(is_tandem_error(e, tandem_errc::timeout));
              CAF_CHECK_EQUAL(text_of(e), "refit to v1 failed: no begin ack from laggard within 30000 ms; v0 stays live "
                                          "on every rollout worker");
            });
  CAF_CHECK_EQUAL(version_of(rollout[0]), 0u);
  CAF_CHECK(!generators[0]->pending_version().has_value());
}

CAF_TEST(a refit failing mid-way aborts on every rollout worker and names the worker and the reason) {
  handshake();
  train_to_v1();
  auto h = self->request(coordinator, caf::infinite, refit_atom_v, weight_version{1});
  expect((refit_atom, weight_version), from(self).to(coordinator));
  expect((begin_atom, weight_version), from(coordinator).to(rollout[0]));
  expect((begin_atom, weight_version), from(coordinator).to(rollout[1]));
  expect((refit_ack), from(rollout[0]).to(coordinator));
  expect((refit_ack), from(rollout[1]).to(coordinator));
  expect((export_atom, export_job), from(coordinator).to(policy));
  expect((weight_bucket), from(policy).to(coordinator));
  expect((bucket_atom, weight_bucket), from(coordinator).to(rollout[0]));
  expect((bucket_atom, weight_bucket), from(coordinator).to(rollout[1]));
  expect((refit_ack), from(rollout[0]).to(coordinator));
  expect((refit_ack), from(rollout[1]).to(coordinator));
  // bucket 1 of 3 fails on rollout-1
  generators[1]->fail_next(gpu::fake_generate_operation::import_bucket);
  expect((export_atom, export_job), from(coordinator).to(policy));
  expect((weight_bucket), from(policy).to(coordinator));
  expect((bucket_atom, weight_bucket), from(coordinator).to(rollout[0]));
  expect((bucket_atom, weight_bucket), from(coordinator).to(rollout[1]));
  expect((refit_ack), from(rollout[0]).to(coordinator));
  expect((caf::error), from(rollout[1]).to(coordinator));
  // abort everywhere, then the error
  expect((abort_atom, weight_version), from(coordinator).to(rollout[0]).with(_, weight_version{1}));
  expect((abort_atom, weight_version), from(coordinator).to(rollout[1]).with(_, weight_version{1}));
  expect((weight_version), from(rollout[0]).to(coordinator).with(weight_version{0}));
  expect((weight_version), from(rollout[1]).to(coordinator).with(weight_version{0}));
  CAF_CHECK(!sched.has_job());
  h.receive([](refit_report&) { CAF_FAIL("the refit succeeded"); },
            [](caf::error& e) {
              CAF_CHECK(is_tandem_error(e, tandem_errc::engine_failure));
              CAF_CHECK_EQUAL(text_of(e),
                              "refit to v1 failed: rollout-1 at bucket 1: rollout-1: bucket 1 of v1 (update dropped, v0 "
                              "stays live): device_error: fake_generate_engine: injected failure in import_bucket; v0 "
                              "stays live on every rollout worker");
            });
  CAF_CHECK_EQUAL(rollout_versions(), (std::vector<weight_version>{0, 0}));
  for (const auto& g : generators) CAF_CHECK(!g->pending_version().has_value());
  // the coordinator is ready again: the same refit succeeds now
  auto retry = ask<refit_report>(coordinator, refit_atom_v, weight_version{1});
  CAF_REQUIRE(retry.value.has_value());
  CAF_CHECK_EQUAL(rollout_versions(), (std::vector<weight_version>{1, 1}));
  for (const auto& g : generators) CAF_CHECK_EQUAL(g->weight_hash(), trainer->weight_hash());
}

CAF_TEST(a rollout worker that stops answering is named once virtual time passes the timeout) {
  auto c = coordinator_with(sys.spawn(scripted_rollout, std::string("sleeper"), misbehaviour::silent));
  sched.run();
  CAF_REQUIRE(ask<handshake_report>(c, handshake_atom_v).value.has_value());
  train_to_v1();
  auto h = self->request(c, caf::infinite, refit_atom_v, weight_version{1});
  sched.run();
  advance_time(std::chrono::seconds(29));
  sched.run();
  CAF_CHECK(generators[0]->pending_version() == std::optional<std::uint64_t>{1});  // still waiting
  advance_time(std::chrono::seconds(1));  // the begin request times out: abort everywhere
  sched.run();
  advance_time(std::chrono::seconds(30));  // the sleeper does not answer the abort either
  sched.run();
  h.receive([](refit_report&) { CAF_FAIL("the refit succeeded"); },
            [](caf::error& e) {
              CAF_CHECK(is_tandem_error(e, tandem_errc::timeout));
              const auto text = text_of(e);
              CAF_CHECK_NOT_EQUAL(text.find("refit to v1 failed: sleeper at begin"), std::string::npos);
              CAF_CHECK_NOT_EQUAL(text.find("sleeper did not answer the abort"), std::string::npos);
            });
  CAF_CHECK_EQUAL(version_of(rollout[0]), 0u);
  CAF_CHECK(!generators[0]->pending_version().has_value());
}

CAF_TEST(a commit failing on one worker after another committed says which version each holds) {
  handshake();
  train_to_v1();
  generators[1]->fail_next(gpu::fake_generate_operation::commit_weight_update);
  auto r = ask<refit_report>(coordinator, refit_atom_v, weight_version{1});
  CAF_REQUIRE(!r.value.has_value());
  const auto text = text_of(r.error);
  CAF_CHECK_NOT_EQUAL(text.find("rollout-1 at commit"), std::string::npos);
  CAF_CHECK_NOT_EQUAL(text.find("v0 stays live except: rollout-0 is on v1"), std::string::npos);
  CAF_CHECK_EQUAL(rollout_versions(), (std::vector<weight_version>{1, 0}));
}

CAF_TEST(a colocated refit bumps every rollout worker without exporting a byte) {
  auto shared = std::make_shared<gpu::fake_generate_engine>(tiny_generator());
  CAF_REQUIRE(shared->share_weights(trainer->shared_weights()).is_ok());
  rollout_worker_config rc;
  rc.name = "rollout-colocated";
  rc.engine = shared;
  rc.manifest = gpu::fake_manifest(tiny_model());
  rc.execution = engine_execution::inline_calls;
  auto colocated = spawn_rollout_worker(sys, rc);
  extra.push_back(caf::actor_cast<caf::actor>(colocated));
  refit_coordinator_config cc;
  cc.mode = refit_mode::colocated;
  cc.policy = policy;
  cc.rollout = {colocated};
  cc.bucket_bytes = test_bucket_bytes;
  auto c = spawn_refit_coordinator(sys, cc);
  extra.push_back(caf::actor_cast<caf::actor>(c));
  sched.run();
  CAF_REQUIRE(ask<handshake_report>(c, handshake_atom_v).value.has_value());
  auto h = self->request(c, caf::infinite, refit_atom_v, weight_version{1});
  expect((refit_atom, weight_version), from(self).to(c));
  expect((bump_atom, weight_version), from(c).to(colocated).with(_, weight_version{1}));
  expect((refit_ack), from(colocated).to(c));
  CAF_CHECK(!sched.has_job());
  h.receive([](refit_report& r) { CAF_CHECK_EQUAL(r.bytes, 0); },
            [](caf::error& e) { CAF_FAIL("the refit failed: " << text_of(e)); });
  CAF_CHECK_EQUAL(version_of(colocated), 1u);
  CAF_CHECK_EQUAL(shared->weight_version(), 1u);
}

CAF_TEST_FIXTURE_SCOPE_END()
