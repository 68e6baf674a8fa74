// The driver's RL step on CAF's test coordinator with fake engines: the exact message order of a
// dedicated-rollout step and of a colocated step, every trajectory from the newest weights,
// refusals while busy, and a lost worker failing the step by name.
#define CAF_SUITE driver
#include "actors/driver/driver.hpp"

#include "support/actor_fixture.hpp"

using namespace tandem;
using namespace tandem::test;

namespace {

using fixture = cluster_fixture;

}  // namespace

CAF_TEST_FIXTURE_SCOPE(driver_tests, fixture)

CAF_TEST(a dedicated rollout step runs generate then score then logprobs then train then a bucketed refit) {
  start({refit_mode::dedicated, 2});
  const auto hs = handshake();
  CAF_REQUIRE_EQUAL(hs.bucket_count, 3u);
  auto h = self->request(driver, caf::infinite, step_atom_v);
  expect((step_atom), from(self).to(driver));
  // generate: prompt 0 on rollout-0, prompt 1 on rollout-1, both for v0
  expect((generate_atom, generate_job), from(driver).to(rollout[0]));
  expect((generate_atom, generate_job), from(driver).to(rollout[1]));
  expect((generate_result), from(rollout[0]).to(driver));
  expect((generate_result), from(rollout[1]).to(driver));
  // score
  expect((score_atom, score_job), from(driver).to(environment));
  expect((score_result), from(environment).to(driver));
  // logprobs, then train (v0 -> v1)
  expect((logprobs_atom, logprobs_job), from(driver).to(policy));
  expect((logprobs_result), from(policy).to(driver));
  expect((train_atom, train_job), from(driver).to(policy));
  expect((train_report), from(policy).to(driver));
  // refit to v1: begin, 3 buckets exported once and sent to both rollout workers, commit
  expect((refit_atom, weight_version), from(driver).to(coordinator).with(_, weight_version{1}));
  expect((begin_atom, weight_version), from(coordinator).to(rollout[0]).with(_, weight_version{1}));
  expect((begin_atom, weight_version), from(coordinator).to(rollout[1]).with(_, weight_version{1}));
  expect((refit_ack), from(rollout[0]).to(coordinator));
  expect((refit_ack), from(rollout[1]).to(coordinator));
  for (int bucket = 0; bucket < 3; ++bucket) {
    expect((export_atom, export_job), from(coordinator).to(policy));
    expect((weight_bucket), from(policy).to(coordinator));
    expect((bucket_atom, weight_bucket), from(coordinator).to(rollout[0]));
    expect((bucket_atom, weight_bucket), from(coordinator).to(rollout[1]));
    expect((refit_ack), from(rollout[0]).to(coordinator));
    expect((refit_ack), from(rollout[1]).to(coordinator));
  }
  expect((commit_atom, weight_version), from(coordinator).to(rollout[0]).with(_, weight_version{1}));
  expect((commit_atom, weight_version), from(coordinator).to(rollout[1]).with(_, weight_version{1}));
  expect((refit_ack), from(rollout[0]).to(coordinator));
  expect((refit_ack), from(rollout[1]).to(coordinator));
  expect((refit_report), from(coordinator).to(driver));
  CAF_CHECK(!sched.has_job());
  h.receive(
      [&](step_report& r) {
        CAF_CHECK_EQUAL(r.step, 0u);
        CAF_CHECK_EQUAL(r.generated_with, 0u);
        CAF_CHECK_EQUAL(r.trained_to, 1u);
        CAF_CHECK_EQUAL(r.trajectories.size(), 4u);
        CAF_CHECK_EQUAL(r.rewards.size(), 4u);
        CAF_CHECK_EQUAL(r.refit.buckets, 3u);
        CAF_CHECK_EQUAL(r.refit.bytes, 256);
        CAF_CHECK_EQUAL(r.refit.dropped_acks, 0u);
        CAF_CHECK_EQUAL(r.micro_batches, 2u);
        CAF_CHECK_EQUAL(r.train_tokens, 12);
      },
      [&](caf::error& e) { CAF_FAIL("the step failed: " << text_of(e)); });
  CAF_CHECK_EQUAL(rollout_versions(), (std::vector<weight_version>{1, 1}));
}

CAF_TEST(a colocated step refits by a version bump with no weight bytes sent) {
  start({refit_mode::colocated, 1});
  const auto hs = handshake();
  CAF_CHECK(hs.mode == refit_mode::colocated);
  auto h = self->request(driver, caf::infinite, step_atom_v);
  expect((step_atom), from(self).to(driver));
  expect((generate_atom, generate_job), from(driver).to(rollout[0]));
  expect((generate_result), from(rollout[0]).to(driver));
  expect((score_atom, score_job), from(driver).to(environment));
  expect((score_result), from(environment).to(driver));
  expect((logprobs_atom, logprobs_job), from(driver).to(policy));
  expect((logprobs_result), from(policy).to(driver));
  expect((train_atom, train_job), from(driver).to(policy));
  expect((train_report), from(policy).to(driver));
  expect((refit_atom, weight_version), from(driver).to(coordinator).with(_, weight_version{1}));
  expect((bump_atom, weight_version), from(coordinator).to(rollout[0]).with(_, weight_version{1}));
  expect((refit_ack), from(rollout[0]).to(coordinator));
  expect((refit_report), from(coordinator).to(driver));
  CAF_CHECK(!sched.has_job());
  h.receive(
      [&](step_report& r) {
        CAF_CHECK_EQUAL(r.trained_to, 1u);
        CAF_CHECK(r.refit.mode == refit_mode::colocated);
        CAF_CHECK_EQUAL(r.refit.buckets, 0u);
        CAF_CHECK_EQUAL(r.refit.bytes, 0);
      },
      [&](caf::error& e) { CAF_FAIL("the step failed: " << text_of(e)); });
  CAF_CHECK_EQUAL(rollout_versions(), (std::vector<weight_version>{1}));
}

CAF_TEST(every trajectory of every dedicated step carries the newest version and was generated by its weights) {
  start({refit_mode::dedicated, 2});
  handshake();
  for (std::uint32_t step = 0; step < 3; ++step) {
    const std::uint64_t hash = trainer->weight_hash();  // the weights of version `step`
    auto out = run_step();
    CAF_REQUIRE(out.report.has_value());
    CAF_CHECK_EQUAL(out.report->step, step);
    for (const auto& t : out.report->trajectories) CAF_CHECK_EQUAL(t.version, weight_version{step});
    CAF_CHECK(generated_by(*out.report, hash));
    CAF_CHECK_EQUAL(out.report->trained_to, weight_version{step} + 1);
    CAF_CHECK_NOT_EQUAL(trainer->weight_hash(), hash);
    for (const auto& g : generators) CAF_CHECK_EQUAL(g->weight_hash(), trainer->weight_hash());
  }
  CAF_CHECK_EQUAL(rollout_versions(), (std::vector<weight_version>{3, 3}));
}

CAF_TEST(every trajectory of every colocated step carries the newest version and was generated by its weights) {
  start({refit_mode::colocated, 1});
  handshake();
  for (std::uint32_t step = 0; step < 3; ++step) {
    const std::uint64_t hash = trainer->weight_hash();
    auto out = run_step();
    CAF_REQUIRE(out.report.has_value());
    for (const auto& t : out.report->trajectories) CAF_CHECK_EQUAL(t.version, weight_version{step});
    CAF_CHECK(generated_by(*out.report, hash));
  }
  CAF_CHECK_EQUAL(rollout_versions(), (std::vector<weight_version>{3}));
}

CAF_TEST(the rewards are the parity reward of the fake environment on the last token and their mean is reported) {
  start({refit_mode::dedicated, 2});
  handshake();
  auto out = run_step();
  CAF_REQUIRE(out.report.has_value());
  double sum = 0;
  for (std::size_t i = 0; i < out.report->trajectories.size(); ++i) {
    const auto& t = out.report->trajectories[i];
    CAF_CHECK_EQUAL(out.report->rewards[i], t.tokens.back() % 2 == 0 ? 1.0 : 0.0);
    sum += out.report->rewards[i];
  }
  CAF_CHECK_EQUAL(out.report->reward_mean, sum / 4);
}

CAF_TEST(a step request while a step runs is refused with wrong_state) {
  start({refit_mode::dedicated, 2});
  handshake();
  auto first = self->request(driver, caf::infinite, step_atom_v);
  expect((step_atom), from(self).to(driver));
  auto second = self->request(driver, caf::infinite, step_atom_v);
  expect((step_atom), from(self).to(driver));
  second.receive([](step_report&) { CAF_FAIL("a second step was accepted"); },
                 [](caf::error& e) {
                   CAF_CHECK(is_tandem_error(e, tandem_errc::wrong_state));
                   CAF_CHECK_NOT_EQUAL(text_of(e).find("generating"), std::string::npos);
                 });
  sched.run();
  first.receive([](step_report& r) { CAF_CHECK_EQUAL(r.trained_to, 1u); },
                [](caf::error& e) { CAF_FAIL("the first step failed: " << text_of(e)); });
}

CAF_TEST(a worker declared lost fails the running step naming it and refuses later steps) {
  start({refit_mode::dedicated, 2});
  handshake();
  auto h = self->request(driver, caf::infinite, step_atom_v);
  expect((step_atom), from(self).to(driver));
  self->send(driver, worker_lost_atom_v, std::string("rollout-1"), std::string("no heartbeat for 10 s"));
  sched.run();
  h.receive([](step_report&) { CAF_FAIL("the step succeeded"); },
            [](caf::error& e) {
              CAF_CHECK(is_tandem_error(e, tandem_errc::worker_lost));
              CAF_CHECK_NOT_EQUAL(text_of(e).find("rollout-1 was lost: no heartbeat for 10 s"), std::string::npos);
            });
  auto later = run_step();
  CAF_CHECK(!later.report.has_value());
  CAF_CHECK(is_tandem_error(later.error, tandem_errc::worker_lost));
  CAF_CHECK_NOT_EQUAL(text_of(later.error).find("rollout-1"), std::string::npos);
}

CAF_TEST(a step whose refit fails reports the failing worker and leaves the old version live everywhere) {
  start({refit_mode::dedicated, 2});
  handshake();
  generators[1]->fail_next(gpu::fake_generate_operation::import_bucket);
  auto out = run_step();
  CAF_REQUIRE(!out.report.has_value());
  const std::string text = text_of(out.error);
  CAF_CHECK(is_tandem_error(out.error, tandem_errc::engine_failure));
  CAF_CHECK_NOT_EQUAL(text.find("refit to v1 failed"), std::string::npos);
  CAF_CHECK_NOT_EQUAL(text.find("rollout-1"), std::string::npos);
  CAF_CHECK_NOT_EQUAL(text.find("injected failure in import_bucket"), std::string::npos);
  CAF_CHECK_NOT_EQUAL(text.find("v0 stays live on every rollout worker"), std::string::npos);
  CAF_CHECK_EQUAL(rollout_versions(), (std::vector<weight_version>{0, 0}));
  for (const auto& g : generators) CAF_CHECK(!g->pending_version().has_value());
}

CAF_TEST_FIXTURE_SCOPE_END()
