// The refit coordinator on CAF's test coordinator, against scripted policy and rollout actors (the
// same interfaces; the bytes themselves are refit_stream's, tested over real refit groups in
// refit_stream_test.cpp): the handshake once, the exact messages of a streamed refit (stream to
// every rank, then commit), stale acks dropped and counted, a stream ack that says aborted or
// lacks checksums failing the refit and aborting everywhere with the old version live, and silent
// or lagging rollout workers named when virtual time passes the deadline.
#define CAF_SUITE refit_coordinator
#include "actors/refit_coordinator/refit_coordinator.hpp"

#include "support/actor_fixture.hpp"

using namespace tandem;
using namespace tandem::test;

namespace {

/// How a scripted rollout worker answers a stream or a commit.
enum class behaviour {
  well,              ///< stages every bucket (checksums matched when asked), commits
  old_version_ack,   ///< answers stream(v) with an ack for v - 1
  silent,            ///< never answers stream or abort
  corrupt_bucket_1,  ///< its stream ack says aborted: bucket 1's checksum did not match
  no_checksums,      ///< its stream ack says staged but compared no checksum
  commit_fails,      ///< stages, then its commit fails
};

struct scripted_rollout_state {
  static inline const char* name = "scripted_rollout";
  weight_version live = 0;
  std::vector<caf::typed_response_promise<refit_ack>> held;  // streams never answered
  std::vector<caf::typed_response_promise<weight_version>> held_aborts;
};

rollout_actor::behavior_type scripted_rollout(rollout_actor::stateful_pointer<scripted_rollout_state> self,
                                              std::string name, behaviour how) {
  auto refuse = [name](const char* what) { return tandem_error(tandem_errc::wrong_state, name + ": " + what); };
  return {
      [refuse](generate_atom, generate_job&) -> caf::result<generate_result> { return refuse("generate"); },
      [name](check_atom, const manifest_check& m) -> caf::result<manifest_accepted> {
        gpu::bucket_plan plan(m.manifest, m.bucket_bytes);
        return manifest_accepted{name, 0, plan.bucket_count(), plan.total_bytes()};
      },
      [self, name, how](stream_atom, const stream_job& job) -> caf::result<refit_ack> {
        refit_ack a{name, job.version, refit_stage::stream, {}, {}};
        a.stream.checksums = job.checksums;
        a.stream.checksums_matched = job.checksums ? job.bucket_count : 0;
        switch (how) {
          case behaviour::old_version_ack: a.version = job.version - 1; break;
          case behaviour::silent: {
            auto rp = self->make_response_promise<refit_ack>();
            self->state.held.push_back(rp);
            return rp;
          }
          case behaviour::corrupt_bucket_1:
            a.stream.aborted = true;
            a.stream.failed_bucket = 1;
            a.stream.checksums_matched = 1;
            a.stream.checksum_mismatch = 1;
            a.error = name + ": bucket 1 of v" + std::to_string(job.version) +
                      ": checksum mismatch (corrupted in transit); update dropped, v0 stays live";
            break;
          case behaviour::no_checksums:
            a.stream.checksums = false;
            a.stream.checksums_matched = 0;
            break;
          case behaviour::well:
          case behaviour::commit_fails: break;
        }
        return a;
      },
      [self, name, how](commit_atom, weight_version v) -> caf::result<refit_ack> {
        if (how == behaviour::commit_fails)
          return tandem_error(tandem_errc::engine_failure, name + ": commit v" + std::to_string(v) + ": device_error: scripted");
        self->state.live = v;
        return refit_ack{name, v, refit_stage::commit, {}, {}};
      },
      [self, how](abort_atom, weight_version) -> caf::result<weight_version> {
        if (how == behaviour::silent) {
          auto rp = self->make_response_promise<weight_version>();
          self->state.held_aborts.push_back(rp);
          return rp;
        }
        return self->state.live;
      },
      [self, name](bump_atom, weight_version v) -> caf::result<refit_ack> {
        self->state.live = v;
        return refit_ack{name, v, refit_stage::bump, {}, {}};
      },
      [self](version_atom) { return self->state.live; },
  };
}

/// How the scripted policy root answers a stream.
enum class root_behaviour { well, export_fails };

/// Policy rank 0 (same interface): the tiny model's manifest, and a stream report per stream.
policy_actor::behavior_type scripted_policy(root_behaviour how) {
  auto refuse = [](const char* what) { return tandem_error(tandem_errc::wrong_state, std::string("policy-0: ") + what); };
  return {
      [refuse](logprobs_atom, logprobs_job&) -> caf::result<logprobs_result> { return refuse("logprobs"); },
      [refuse](train_atom, train_job&) -> caf::result<train_report> { return refuse("train"); },
      [](manifest_atom) { return manifest_reply{"policy-0", 0, gpu::fake_manifest(tiny_model())}; },
      [how](stream_atom, const stream_job& job) -> caf::result<stream_report> {
        if (how == root_behaviour::export_fails)
          return tandem_error(tandem_errc::engine_failure, "policy-0: stream of v" + std::to_string(job.version) +
                                                               ": bucket 2: device_error: scripted export failure; the "
                                                               "stream's closing told the receivers");
        return stream_report{"policy-0", job.version, job.bucket_count, 256};
      },
      [refuse](save_atom, save_job&) -> caf::result<save_report> { return refuse("save"); },
      [refuse](load_atom, load_job&) -> caf::result<load_report> { return refuse("load"); },
      [](version_atom) { return weight_version{1}; },
  };
}

struct fixture : test_coordinator_fixture<actor_test_config> {
  policy_actor policy;
  std::vector<rollout_actor> rollout;
  refit_coordinator_actor coordinator;
  std::vector<caf::actor> all;

  /// Policy rank 0 and rollout workers "rollout-0", "rollout-1", ... behaving as `how`, and a
  /// dedicated coordinator over them (30 s deadlines).
  void start(std::vector<behaviour> how = {behaviour::well, behaviour::well}, root_behaviour root = root_behaviour::well,
             bool checksums = false) {
    rollout.clear();
    policy = sys.spawn(scripted_policy, root);
    all.push_back(caf::actor_cast<caf::actor>(policy));
    for (std::size_t i = 0; i < how.size(); ++i) {
      rollout.push_back(sys.spawn(scripted_rollout, "rollout-" + std::to_string(i), how[i]));
      all.push_back(caf::actor_cast<caf::actor>(rollout.back()));
    }
    refit_coordinator_config cc;
    cc.policy = policy;
    cc.rollout = rollout;
    cc.bucket_bytes = test_bucket_bytes;
    cc.checksums = checksums;
    cc.timeout = std::chrono::seconds(30);
    coordinator = spawn_refit_coordinator(sys, cc);
    all.push_back(caf::actor_cast<caf::actor>(coordinator));
    sched.run();
  }

  ~fixture() override {
    for (auto& a : all) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  }

  template <class T, class Handle, class... Ts>
  answer<T> ask(const Handle& whom, Ts&&... xs) {
    answer<T> out;
    auto h = self->request(whom, caf::infinite, std::forward<Ts>(xs)...);
    sched.run();
    h.receive([&](T& x) { out.value = std::move(x); }, [&](caf::error& e) { out.error = std::move(e); });
    return out;
  }

  void handshake() {
    auto r = ask<handshake_report>(coordinator, handshake_atom_v);
    if (!r.value) CAF_FAIL("handshake failed: " << text_of(r.error));
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

  /// True when a message waits in `whom`'s mailbox.
  template <class Handle>
  static bool has_mail(const Handle& whom) {
    return caf::actor_cast<caf::abstract_actor*>(whom)->peek_at_next_mailbox_element() != nullptr;
  }
};

}  // namespace

CAF_TEST_FIXTURE_SCOPE(refit_coordinator_tests, fixture)

CAF_TEST(the handshake fetches the manifest once and has every rollout worker check it) {
  start();
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
  start();
  auto r = ask<refit_report>(coordinator, refit_atom_v, weight_version{1});
  CAF_CHECK(is_tandem_error(r.error, tandem_errc::wrong_state));
  CAF_CHECK_EQUAL(text_of(r.error), "refit coordinator: refit refused: no handshake yet");
}

CAF_TEST(a manifest a rollout worker refuses fails the handshake naming the difference) {
  start({});
  auto other_model = tiny_model();
  other_model.tensors = 5;
  rollout_worker_config rc;
  rc.name = "rollout-odd";
  rc.engine = std::make_shared<gpu::fake_generate_engine>(tiny_generator());
  rc.manifest = gpu::fake_manifest(other_model);
  rc.execution = engine_execution::inline_calls;
  auto odd = spawn_rollout_worker(sys, rc);
  all.push_back(caf::actor_cast<caf::actor>(odd));
  refit_coordinator_config cc;
  cc.policy = policy;
  cc.rollout = {odd};
  cc.bucket_bytes = test_bucket_bytes;
  auto c = spawn_refit_coordinator(sys, cc);
  all.push_back(caf::actor_cast<caf::actor>(c));
  sched.run();
  auto r = ask<handshake_report>(c, handshake_atom_v);
  CAF_REQUIRE(!r.value.has_value());
  CAF_CHECK(is_tandem_error(r.error, tandem_errc::invalid_config));
  check_contains(text_of(r.error), "rollout-odd: manifest refused: manifest entry 0");
  // back to idle: a refit is still refused, a corrected handshake could follow
  auto refit = ask<refit_report>(c, refit_atom_v, weight_version{1});
  CAF_CHECK_EQUAL(text_of(refit.error), "refit coordinator: refit refused: no handshake yet");
}

CAF_TEST(a refit to a version not newer than the live one is refused with stale_version) {
  start();
  handshake();
  auto r = ask<refit_report>(coordinator, refit_atom_v, weight_version{0});
  CAF_CHECK(is_tandem_error(r.error, tandem_errc::stale_version));
  CAF_CHECK_EQUAL(text_of(r.error), "refit coordinator: refit to v0 refused: v0 is live");
}

CAF_TEST(a dedicated refit streams to every rank at once and then commits with no message per bucket) {
  start({behaviour::well, behaviour::well}, root_behaviour::well, true);
  handshake();
  auto h = self->request(coordinator, caf::infinite, refit_atom_v, weight_version{1});
  expect((refit_atom, weight_version), from(self).to(coordinator));
  // the scripted workers echo the job: 3 buckets, checksums on (their acks match 3 checksums)
  expect((stream_atom, stream_job), from(coordinator).to(rollout[0]));
  expect((stream_atom, stream_job), from(coordinator).to(rollout[1]));
  expect((stream_atom, stream_job), from(coordinator).to(policy));
  expect((refit_ack), from(rollout[0]).to(coordinator));
  expect((refit_ack), from(rollout[1]).to(coordinator));
  CAF_CHECK(!has_mail(rollout[0]));  // no commit before the policy root answered its stream
  expect((stream_report), from(policy).to(coordinator));
  expect((commit_atom, weight_version), from(coordinator).to(rollout[0]).with(_, weight_version{1}));
  expect((commit_atom, weight_version), from(coordinator).to(rollout[1]).with(_, weight_version{1}));
  expect((refit_ack), from(rollout[0]).to(coordinator));
  expect((refit_ack), from(rollout[1]).to(coordinator));
  CAF_CHECK(!sched.has_job());
  h.receive(
      [](refit_report& r) {
        CAF_CHECK_EQUAL(r.version, 1u);
        CAF_CHECK_EQUAL(r.buckets, 3u);
        CAF_CHECK_EQUAL(r.bytes, 256);
        CAF_CHECK(r.checksums);
        CAF_CHECK_EQUAL(r.dropped_acks, 0u);
      },
      [](caf::error& e) { CAF_FAIL("the refit failed: " << text_of(e)); });
  CAF_CHECK_EQUAL(rollout_versions(), (std::vector<weight_version>{1, 1}));
}

CAF_TEST(acks of an old version or of a worker that already acked or of a stranger are dropped and counted) {
  start();
  handshake();
  auto h = self->request(coordinator, caf::infinite, refit_atom_v, weight_version{1});
  expect((refit_atom, weight_version), from(self).to(coordinator));
  // stream(v1) is on its way to every rank; acks of v0 and a stranger's reach the coordinator first
  self->send(coordinator, refit_ack{"rollout-0", 0, refit_stage::stream, {}, {}});
  self->send(coordinator, refit_ack{"rollout-1", 0, refit_stage::stream, {}, {}});
  self->send(coordinator, refit_ack{"rollout-7", 1, refit_stage::stream, {}, {}});
  expect((refit_ack), from(self).to(coordinator));
  expect((refit_ack), from(self).to(coordinator));
  expect((refit_ack), from(self).to(coordinator));
  expect((stream_atom, stream_job), from(coordinator).to(rollout[0]));
  expect((refit_ack), from(rollout[0]).to(coordinator));
  // rollout-0 acked its stream already: the same ack again is a duplicate
  self->send(coordinator, refit_ack{"rollout-0", 1, refit_stage::stream, {}, {}});
  expect((refit_ack), from(self).to(coordinator));
  expect((stream_atom, stream_job), from(coordinator).to(rollout[1]));
  expect((refit_ack), from(rollout[1]).to(coordinator));
  CAF_CHECK(!has_mail(rollout[0]));  // still waiting for the policy root: no commit yet
  expect((stream_atom, stream_job), from(coordinator).to(policy));
  expect((stream_report), from(policy).to(coordinator));
  expect((commit_atom, weight_version), from(coordinator).to(rollout[0]));
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

CAF_TEST(a stream ack saying a bucket was corrupted fails the refit and aborts it on every rollout worker) {
  start({behaviour::well, behaviour::corrupt_bucket_1}, root_behaviour::well, true);
  handshake();
  auto h = self->request(coordinator, caf::infinite, refit_atom_v, weight_version{1});
  expect((refit_atom, weight_version), from(self).to(coordinator));
  expect((stream_atom, stream_job), from(coordinator).to(rollout[0]));
  expect((stream_atom, stream_job), from(coordinator).to(rollout[1]));
  expect((stream_atom, stream_job), from(coordinator).to(policy));
  expect((refit_ack), from(rollout[0]).to(coordinator));
  expect((refit_ack), from(rollout[1]).to(coordinator));  // an ack, carrying the failure
  expect((stream_report), from(policy).to(coordinator));
  // abort everywhere (no commit), then the error
  expect((abort_atom, weight_version), from(coordinator).to(rollout[0]).with(_, weight_version{1}));
  expect((abort_atom, weight_version), from(coordinator).to(rollout[1]).with(_, weight_version{1}));
  expect((weight_version), from(rollout[0]).to(coordinator).with(weight_version{0}));
  expect((weight_version), from(rollout[1]).to(coordinator).with(weight_version{0}));
  CAF_CHECK(!sched.has_job());
  h.receive([](refit_report&) { CAF_FAIL("the refit succeeded"); },
            [](caf::error& e) {
              CAF_CHECK(is_tandem_error(e, tandem_errc::invalid_config));
              CAF_CHECK_EQUAL(text_of(e), "refit to v1 failed: rollout-1 at stream: rollout-1: bucket 1 of v1: checksum "
                                          "mismatch (corrupted in transit); update dropped, v0 stays live; v0 stays live "
                                          "on every rollout worker");
            });
  CAF_CHECK_EQUAL(rollout_versions(), (std::vector<weight_version>{0, 0}));
}

CAF_TEST(with checksums on a stream ack that did not match the checksum of every bucket fails the refit) {
  start({behaviour::no_checksums, behaviour::well}, root_behaviour::well, true);
  handshake();
  auto r = ask<refit_report>(coordinator, refit_atom_v, weight_version{1});
  CAF_REQUIRE(!r.value.has_value());
  CAF_CHECK(is_tandem_error(r.error, tandem_errc::invalid_config));
  CAF_CHECK_EQUAL(text_of(r.error), "refit to v1 failed: rollout-0 at stream: staged v1 with 0 of 3 bucket checksums "
                                    "matched (it compared none); v0 stays live on every rollout worker");
  CAF_CHECK_EQUAL(rollout_versions(), (std::vector<weight_version>{0, 0}));
  // without checksums the same ack is a staged stream
  start({behaviour::no_checksums}, root_behaviour::well, false);
  handshake();
  CAF_CHECK(ask<refit_report>(coordinator, refit_atom_v, weight_version{1}).value.has_value());
}

CAF_TEST(the policy root failing its stream fails the refit with the reason of the root) {
  start({behaviour::well, behaviour::well}, root_behaviour::export_fails);
  handshake();
  auto r = ask<refit_report>(coordinator, refit_atom_v, weight_version{1});
  CAF_REQUIRE(!r.value.has_value());
  CAF_CHECK(is_tandem_error(r.error, tandem_errc::engine_failure));
  CAF_CHECK_EQUAL(text_of(r.error), "refit to v1 failed: policy rank 0 at stream: policy-0: stream of v1: bucket 2: "
                                    "device_error: scripted export failure; the stream's closing told the receivers; "
                                    "v0 stays live on every rollout worker");
  CAF_CHECK_EQUAL(rollout_versions(), (std::vector<weight_version>{0, 0}));
}

CAF_TEST(an ack a worker answers with an old version is ignored and the stage deadline names the worker) {
  start({behaviour::well, behaviour::old_version_ack});
  handshake();
  auto h = self->request(coordinator, caf::infinite, refit_atom_v, weight_version{1});
  sched.run();
  // rollout-1 answered stream(v1) with an ack for v0: ignored, so the refit still waits
  CAF_CHECK(!has_mail(rollout[0]));
  advance_time(std::chrono::seconds(30));
  sched.run();
  h.receive([](refit_report&) { CAF_FAIL("the refit succeeded"); },
            [](caf::error& e) {
              CAF_CHECK(is_tandem_error(e, tandem_errc::timeout));
              CAF_CHECK_EQUAL(text_of(e), "refit to v1 failed: no stream ack from rollout-1 within 30000 ms; v0 stays live "
                                          "on every rollout worker");
            });
  CAF_CHECK_EQUAL(rollout_versions(), (std::vector<weight_version>{0, 0}));
}

CAF_TEST(a rollout worker that stops answering is named once virtual time passes the timeout) {
  start({behaviour::well, behaviour::silent});
  handshake();
  auto h = self->request(coordinator, caf::infinite, refit_atom_v, weight_version{1});
  sched.run();
  advance_time(std::chrono::seconds(29));
  sched.run();
  CAF_CHECK(!has_mail(rollout[0]));  // still waiting: no commit, no abort
  advance_time(std::chrono::seconds(1));  // the stream request times out: abort everywhere
  sched.run();
  advance_time(std::chrono::seconds(30));  // the silent worker does not answer the abort either
  sched.run();
  h.receive([](refit_report&) { CAF_FAIL("the refit succeeded"); },
            [](caf::error& e) {
              CAF_CHECK(is_tandem_error(e, tandem_errc::timeout));
              const auto text = text_of(e);
              check_contains(text, "refit to v1 failed: rollout-1 at stream");
              check_contains(text, "rollout-1 did not answer the abort");
            });
  const auto versions = rollout_versions();
  CAF_CHECK_EQUAL(versions, (std::vector<weight_version>{0, 0}));
}

CAF_TEST(a commit failing on one worker after another committed says which version each holds) {
  start({behaviour::well, behaviour::commit_fails});
  handshake();
  auto r = ask<refit_report>(coordinator, refit_atom_v, weight_version{1});
  CAF_REQUIRE(!r.value.has_value());
  const auto text = text_of(r.error);
  check_contains(text, "rollout-1 at commit: rollout-1: commit v1: device_error: scripted");
  check_contains(text, "v0 stays live except: rollout-0 is on v1");
  CAF_CHECK_EQUAL(rollout_versions(), (std::vector<weight_version>{1, 0}));
}

CAF_TEST(a colocated refit bumps every rollout worker without streaming a byte) {
  start({});
  auto trainer = std::make_shared<gpu::fake_train_engine>(tiny_model());
  auto shared = std::make_shared<gpu::fake_generate_engine>(tiny_generator());
  CAF_REQUIRE(shared->share_weights(trainer->shared_weights()).is_ok());
  rollout_worker_config rc;
  rc.name = "rollout-colocated";
  rc.engine = shared;
  rc.manifest = gpu::fake_manifest(tiny_model());
  rc.execution = engine_execution::inline_calls;
  auto colocated = spawn_rollout_worker(sys, rc);
  all.push_back(caf::actor_cast<caf::actor>(colocated));
  refit_coordinator_config cc;
  cc.mode = refit_mode::colocated;
  cc.policy = policy;
  cc.rollout = {colocated};
  cc.bucket_bytes = test_bucket_bytes;
  auto c = spawn_refit_coordinator(sys, cc);
  all.push_back(caf::actor_cast<caf::actor>(c));
  sched.run();
  CAF_REQUIRE(ask<handshake_report>(c, handshake_atom_v).value.has_value());
  auto h = self->request(c, caf::infinite, refit_atom_v, weight_version{1});
  expect((refit_atom, weight_version), from(self).to(c));
  expect((bump_atom, weight_version), from(c).to(colocated).with(_, weight_version{1}));
  expect((refit_ack), from(colocated).to(c));
  CAF_CHECK(!sched.has_job());
  h.receive(
      [](refit_report& r) {
        CAF_CHECK_EQUAL(r.bytes, 0);
        CAF_CHECK_EQUAL(r.buckets, 0u);
      },
      [](caf::error& e) { CAF_FAIL("the refit failed: " << text_of(e)); });
  auto v = ask<weight_version>(colocated, version_atom_v);
  CAF_CHECK(v.value == std::optional<weight_version>{1});
  CAF_CHECK_EQUAL(shared->weight_version(), 1u);
}

CAF_TEST_FIXTURE_SCOPE_END()
