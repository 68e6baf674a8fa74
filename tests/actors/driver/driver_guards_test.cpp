// The driver's two consistency guards, each made to fire by an injected fault: a data-parallel
// policy rank whose weights drifted in the optimizer step (the step fails naming it and nothing is
// refitted), and a trajectory of an older version in a rollout reply (stale_version naming the
// worker and the trajectory; nothing is trained). Beside each, the case without the fault, and for
// the second, the same fault one layer down (in the engine), where the rollout worker catches it
// first. On a real actor system with engine calls on their own threads: an all-reduce and a refit
// stream wait for every rank.
//
// An in-process policy_worker reports no weights digest; between processes the worker host adds
// the engine's digest to every train report (actors/worker/host.cpp, on_train). reporting_digests
// below does the same in front of each rank, so the driver sees what it sees in a run.
#define CAF_SUITE driver_guards
#include "actors/driver/driver.hpp"

#include <memory>
#include <optional>
#include <utility>

#include "support/actor_fixture.hpp"

using namespace tandem;
using namespace tandem::test;

namespace {

// ---- in front of the workers ------------------------------------------------------------------

/// Stands in front of policy rank `rank` as the worker host does: every train report carries the
/// weights digest of the rank's engine, read when the step is done (the engine is idle then).
policy_actor::behavior_type reporting_digests(policy_actor::pointer self, policy_actor rank,
                                              std::shared_ptr<gpu::train_engine> engine) {
  self->link_to(rank);
  return {
      [=](logprobs_atom a, logprobs_job& job) { return self->delegate(rank, a, std::move(job)); },
      [=](train_atom, train_job& job) -> caf::result<train_report> {
        auto rp = self->make_response_promise<train_report>();
        self->request(rank, caf::infinite, train_atom_v, std::move(job))
            .then(
                [rp, engine](train_report& r) mutable {
                  r.weights_digest = engine->weights_digest();
                  rp.deliver(std::move(r));
                },
                [rp](caf::error& e) mutable { rp.deliver(std::move(e)); });
        return rp;
      },
      [=](manifest_atom a) { return self->delegate(rank, a); },
      [=](stream_atom a, stream_job& job) { return self->delegate(rank, a, std::move(job)); },
      [=](save_atom a, save_job& job) { return self->delegate(rank, a, std::move(job)); },
      [=](load_atom a, load_job& job) { return self->delegate(rank, a, std::move(job)); },
      [=](version_atom a) { return self->delegate(rank, a); },
  };
}

/// The driver's handle of every policy rank: reporting_digests in front of it.
void report_digests(cluster& c) {
  c.hooks.policy_for_driver = [&c](caf::actor_system& sys, std::size_t r, policy_actor rank) -> policy_actor {
    return sys.spawn(reporting_digests, rank, std::shared_ptr<gpu::train_engine>(c.trainers[r]));
  };
}

/// Stands in front of a rollout worker whose replies are relayed (as a remote worker's are): from
/// its second reply on, trajectory `id` is the copy kept from its first reply, generated with the
/// weights of then. A stale reply, as a relay that resends a cached answer produces.
rollout_actor replaying_trajectory(caf::actor_system& sys, rollout_actor worker, std::uint64_t id) {
  auto kept = std::make_shared<std::optional<trajectory>>();
  auto edit = [kept, id](generate_result& r) {
    for (auto& t : r.trajectories) {
      if (t.id != id) continue;
      if (*kept) t = **kept;
      else *kept = t;
    }
  };
  return sys.spawn(relaying_rollout, worker, std::function<void(const generate_job&)>{}, edit);
}

// ---- in the engine ----------------------------------------------------------------------------

/// A generate engine breaking the one-version-per-sequence contract: once its weights are past v0,
/// it reports sequence `id` as generated with the version before the live one (a sequence kept
/// across a refit). Everything else is the wrapped engine's.
class stale_sequence_engine final : public gpu::generate_engine {
 public:
  stale_sequence_engine(std::shared_ptr<gpu::generate_engine> engine, std::uint64_t id)
      : engine_(std::move(engine)), id_(id) {}

  gpu::status submit(std::span<const gpu::generation_request> requests) override { return engine_->submit(requests); }
  gpu::result<std::int64_t> step() override { return engine_->step(); }
  std::vector<gpu::finished_sequence> collect() override {
    auto out = engine_->collect();
    for (auto& f : out) {
      if (f.id == id_ && f.weight_version > 0) f.weight_version -= 1;
    }
    return out;
  }
  std::uint64_t weight_version() const override { return engine_->weight_version(); }
  gpu::status begin_weight_update(std::uint64_t version) override { return engine_->begin_weight_update(version); }
  gpu::status import_bucket(std::size_t index, std::span<const std::byte> bytes) override {
    return engine_->import_bucket(index, bytes);
  }
  gpu::status commit_weight_update() override { return engine_->commit_weight_update(); }
  void abort_weight_update() override { engine_->abort_weight_update(); }
  gpu::refit_receive receive() const override { return engine_->receive(); }
  bool has_live_weights() const override { return engine_->has_live_weights(); }
  gpu::status share_weights(const gpu::weight_source& source) override { return engine_->share_weights(source); }
  bool shares_weights() const override { return engine_->shares_weights(); }
  gpu::status bump_weight_version(std::uint64_t version) override { return engine_->bump_weight_version(version); }
  gpu::status release_cache() override { return engine_->release_cache(); }
  gpu::status restore_cache() override { return engine_->restore_cache(); }
  bool cache_resident() const override { return engine_->cache_resident(); }

 private:
  std::shared_ptr<gpu::generate_engine> engine_;
  std::uint64_t id_;
};

/// Two data-parallel policy ranks and two dedicated rollout workers. Prompt k goes to rollout
/// worker k % 2, so rollout-1 generates trajectories 2 and 3 of every step.
const cluster_options two_ranks{.mode = refit_mode::dedicated, .rollout_workers = 2, .policy_ranks = 2};

}  // namespace

CAF_TEST_FIXTURE_SCOPE(driver_guards_tests, threaded_cluster_fixture)

// ---- data-parallel ranks diverged -------------------------------------------------------------

CAF_TEST(data parallel ranks trained from the same weights report equal digests and the step is refitted) {
  report_digests(*this);
  start(two_ranks);
  handshake();
  auto out = run_step();
  if (!out.report) CAF_FAIL("the step failed: " << text_of(out.error));
  const auto& d = out.report->weights_digests;
  CAF_REQUIRE_EQUAL(d.size(), 2u);
  CAF_CHECK_NOT_EQUAL(d[0], 0u);
  CAF_CHECK_EQUAL(d[0], d[1]);
  CAF_CHECK_EQUAL(d[0], trainer->weight_hash());
  CAF_CHECK_EQUAL(out.report->trained_to, 1u);
  CAF_CHECK_EQUAL(rollout_versions(), (std::vector<weight_version>{1, 1}));
  CAF_CHECK_EQUAL(rollout_hashes(), (std::vector<std::uint64_t>{d[0], d[0]}));
}

CAF_TEST(a data parallel rank whose weights drifted in the optimizer step fails the step naming it and nothing is refitted) {
  report_digests(*this);
  hooks.train_options = [](std::size_t rank) {
    gpu::train_engine_options o;
    if (rank == 1) o.adamw.lr *= 2;  // the same all-reduced gradients, applied with another step size
    return o;
  };
  start(two_ranks);
  handshake();
  const std::uint64_t before = trainer->weight_hash();
  CAF_REQUIRE_EQUAL(trainers[1]->weight_hash(), before);  // the ranks start equal
  auto out = run_step();
  CAF_REQUIRE(!out.report.has_value());
  CAF_MESSAGE("the step's error: " << text_of(out.error));
  CAF_CHECK(is_tandem_error(out.error, tandem_errc::engine_failure));
  check_contains(text_of(out.error), "driver: step 0: the weights of policy-1 differ from policy-0's after the "
                                     "optimizer step (data-parallel ranks diverged)");
  CAF_CHECK_EQUAL(trainers[0]->step_count(), 1);  // both ranks took the step ...
  CAF_CHECK_EQUAL(trainers[1]->step_count(), 1);
  CAF_CHECK_NOT_EQUAL(trainers[0]->weight_hash(), trainers[1]->weight_hash());  // ... and ended apart
  CAF_CHECK_EQUAL(rollout_versions(), (std::vector<weight_version>{0, 0}));
  CAF_CHECK_EQUAL(rollout_hashes(), (std::vector<std::uint64_t>{before, before}));
  // the policy is a version ahead of the live one: the next step is refused, never trained on
  auto next = run_step();
  CAF_CHECK(!next.report.has_value());
  CAF_CHECK(is_tandem_error(next.error, tandem_errc::stale_version));
  CAF_CHECK_EQUAL(trainers[0]->step_count(), 1);
  CAF_CHECK_EQUAL(trainers[1]->step_count(), 1);
}

// ---- a trajectory of a stale version ----------------------------------------------------------

CAF_TEST(a rollout reply holding a trajectory of an older version fails the step with stale_version naming the worker and the trajectory and nothing is trained) {
  hooks.rollout_for_driver = [](caf::actor_system& sys, std::size_t i, rollout_actor worker) -> rollout_actor {
    return i == 1 ? replaying_trajectory(sys, worker, 3) : worker;
  };
  start(two_ranks);
  handshake();
  auto first = run_step();
  if (!first.report) CAF_FAIL("step 0 failed: " << text_of(first.error));
  const std::uint64_t hash = trainer->weight_hash();  // the weights of v1
  auto out = run_step();
  CAF_REQUIRE(!out.report.has_value());
  CAF_MESSAGE("the step's error: " << text_of(out.error));
  CAF_CHECK(is_tandem_error(out.error, tandem_errc::stale_version));
  check_contains(text_of(out.error), "driver: step 1: rollout-1 returned trajectory 3 of v0, v1 is live");
  for (const auto& p : policies) {
    auto v = ask<weight_version>(p, version_atom_v);
    CAF_REQUIRE(v.value.has_value());
    CAF_CHECK_EQUAL(*v.value, 1u);
  }
  for (const auto& t : trainers) {
    CAF_CHECK_EQUAL(t->step_count(), 1);
    CAF_CHECK_EQUAL(t->weight_hash(), hash);
  }
  CAF_CHECK_EQUAL(rollout_versions(), (std::vector<weight_version>{1, 1}));
}

CAF_TEST(a sequence its engine reports from an older version is refused by the rollout worker before the driver and nothing is trained) {
  hooks.rollout_engine = [](std::size_t i,
                            std::shared_ptr<gpu::fake_generate_engine> g) -> std::shared_ptr<gpu::generate_engine> {
    if (i == 1) return std::make_shared<stale_sequence_engine>(std::move(g), 3);
    return g;
  };
  start(two_ranks);
  handshake();
  auto first = run_step();
  if (!first.report) CAF_FAIL("step 0 failed: " << text_of(first.error));
  auto out = run_step();
  CAF_REQUIRE(!out.report.has_value());
  CAF_CHECK(is_tandem_error(out.error, tandem_errc::engine_failure));
  const std::string text = text_of(out.error);
  CAF_MESSAGE("the step's error: " << text);
  check_contains(text, "driver: step 1: generate on rollout worker 1");
  check_contains(text, "rollout-1");
  check_contains(text, "mixed versions: sequence 3 was generated with v0, the job asked for v1");
  for (const auto& p : policies) {
    auto v = ask<weight_version>(p, version_atom_v);
    CAF_REQUIRE(v.value.has_value());
    CAF_CHECK_EQUAL(*v.value, 1u);
  }
  for (const auto& t : trainers) CAF_CHECK_EQUAL(t->step_count(), 1);
  CAF_CHECK_EQUAL(rollout_versions(), (std::vector<weight_version>{1, 1}));
}

CAF_TEST_FIXTURE_SCOPE_END()
