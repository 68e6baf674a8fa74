// The production mode, engine calls off CAF's scheduler (engine_call.hpp), on a real actor system
// with real threads: a worker with a call in flight refuses conflicting requests and still
// answers version queries, and whole steps complete (dedicated refits streamed over the local
// refit group). Waits use generous deadlines only.
#define CAF_SUITE engine_threads
#include <chrono>
#include <semaphore>

#include "support/actor_fixture.hpp"

using namespace tandem;
using namespace tandem::test;

namespace {

constexpr auto deadline = std::chrono::seconds(60);

/// A fake generate engine whose first step() blocks until the test opens the gate, telling the
/// test when it got there.
class gated_generate_engine final : public gpu::generate_engine {
 public:
  explicit gated_generate_engine(const gpu::fake_generate_options& o) : inner_(o) {}

  gpu::status submit(std::span<const gpu::generation_request> requests) override { return inner_.submit(requests); }
  gpu::result<std::int64_t> step() override {
    if (first_) {
      first_ = false;
      entered.release();
      gate.acquire();
    }
    return inner_.step();
  }
  std::vector<gpu::finished_sequence> collect() override { return inner_.collect(); }
  std::uint64_t weight_version() const override { return inner_.weight_version(); }
  gpu::status begin_weight_update(std::uint64_t v) override { return inner_.begin_weight_update(v); }
  gpu::status import_bucket(std::size_t i, std::span<const std::byte> b) override { return inner_.import_bucket(i, b); }
  gpu::status commit_weight_update() override { return inner_.commit_weight_update(); }
  void abort_weight_update() override { inner_.abort_weight_update(); }
  gpu::refit_receive receive() const override { return inner_.receive(); }
  bool has_live_weights() const override { return inner_.has_live_weights(); }
  gpu::status share_weights(const gpu::weight_source& s) override { return inner_.share_weights(s); }
  bool shares_weights() const override { return inner_.shares_weights(); }
  gpu::status bump_weight_version(std::uint64_t v) override { return inner_.bump_weight_version(v); }
  gpu::status release_cache() override { return inner_.release_cache(); }
  gpu::status restore_cache() override { return inner_.restore_cache(); }
  bool cache_resident() const override { return inner_.cache_resident(); }

  std::binary_semaphore entered{0};  ///< released when the first step() starts
  std::binary_semaphore gate{0};     ///< the first step() waits for it

 private:
  gpu::fake_generate_engine inner_;
  bool first_ = true;
};

generate_job one_request(weight_version version, std::uint64_t id) {
  generate_job job;
  job.version = version;
  gpu::generation_request r;
  r.id = id;
  r.prompt = {2, 7};
  r.max_new_tokens = 3;
  job.requests.push_back(r);
  return job;
}

struct fixture {
  actor_test_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
};

}  // namespace

CAF_TEST_FIXTURE_SCOPE(engine_threads_tests, fixture)

CAF_TEST(a worker with an engine call in flight refuses a conflicting request and still answers its version) {
  auto engine = std::make_shared<gated_generate_engine>(tiny_generator());
  rollout_worker_config rc;
  rc.name = "rollout-gated";
  rc.engine = engine;
  rc.manifest = gpu::fake_manifest(tiny_model());
  rc.execution = engine_execution::off_scheduler;
  auto worker = spawn_rollout_worker(sys, rc);
  auto first = self->request(worker, deadline, generate_atom_v, one_request(0, 1));
  CAF_REQUIRE(engine->entered.try_acquire_for(deadline));  // the first job is inside step() now
  self->request(worker, deadline, generate_atom_v, one_request(0, 2))
      .receive([](generate_result&) { CAF_FAIL("a second generate was accepted while busy"); },
               [](caf::error& e) {
                 CAF_CHECK(is_tandem_error(e, tandem_errc::wrong_state));
                 CAF_CHECK_EQUAL(text_of(e), "rollout-gated: generate refused: busy with generate");
               });
  self->request(worker, deadline, stream_atom_v, stream_job{1, 3, test_bucket_bytes, false})
      .receive([](refit_ack&) { CAF_FAIL("a refit began while generating"); },
               [](caf::error& e) {
                 CAF_CHECK(is_tandem_error(e, tandem_errc::wrong_state));
                 CAF_CHECK_EQUAL(text_of(e), "rollout-gated: stream refused: busy with generate");
               });
  self->request(worker, deadline, version_atom_v)
      .receive([](weight_version v) { CAF_CHECK_EQUAL(v, 0u); },
               [](caf::error& e) { CAF_FAIL("no version while busy: " << text_of(e)); });
  engine->gate.release();
  first.receive([](generate_result& r) { CAF_CHECK_EQUAL(r.trajectories.size(), 1u); },
                [](caf::error& e) { CAF_FAIL("the first generate failed: " << text_of(e)); });
  // idle again: the next job is accepted
  self->request(worker, deadline, generate_atom_v, one_request(0, 3))
      .receive([](generate_result& r) { CAF_CHECK_EQUAL(r.trajectories[0].id, 3u); },
               [](caf::error& e) { CAF_FAIL("the next generate failed: " << text_of(e)); });
  caf::anon_send_exit(worker, caf::exit_reason::user_shutdown);
}

CAF_TEST(dedicated and colocated steps complete with every engine call on the thread of its worker) {
  for (auto mode : {refit_mode::dedicated, refit_mode::colocated}) {
    cluster c;
    cluster_options o;
    o.mode = mode;
    o.rollout_workers = mode == refit_mode::dedicated ? 2 : 1;
    o.environment_workers = 2;  // detached scoring workers
    c.spawn(sys, o, engine_execution::off_scheduler);
    self->request(c.coordinator, deadline, handshake_atom_v)
        .receive([](handshake_report&) {}, [](caf::error& e) { CAF_FAIL("handshake failed: " << text_of(e)); });
    for (std::uint32_t step = 0; step < 2; ++step) {
      const auto hash = c.trainer->weight_hash();  // no engine call runs between steps
      self->request(c.driver, deadline, step_atom_v)
          .receive(
              [&](step_report& r) {
                CAF_CHECK_EQUAL(r.trained_to, weight_version{step} + 1);
                for (const auto& t : r.trajectories) CAF_CHECK_EQUAL(t.weight_version, weight_version{step});
                CAF_CHECK(c.generated_by(r, hash));
              },
              [](caf::error& e) { CAF_FAIL("the step failed: " << text_of(e)); });
    }
    for (auto& r : c.rollout) {
      self->request(r, deadline, version_atom_v)
          .receive([](weight_version v) { CAF_CHECK_EQUAL(v, 2u); },
                   [](caf::error& e) { CAF_FAIL("no version: " << text_of(e)); });
    }
    c.shut_down();
  }
}

CAF_TEST_FIXTURE_SCOPE_END()
