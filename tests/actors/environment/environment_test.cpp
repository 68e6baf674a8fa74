// The environment pool on CAF's test coordinator: jobs split over the workers come back in job
// order; the parity scoring (the fake task's reward, single-turn) rewards an even last token;
// multi-turn feedback passes through; a pool without a scoring function refuses its jobs.
#define CAF_SUITE environment
#include "actors/environment/environment.hpp"

#include "support/actor_fixture.hpp"

using namespace tandem;
using namespace tandem::test;

namespace {

struct fixture : test_coordinator_fixture<actor_test_config> {
  std::vector<environment_actor> pools;

  ~fixture() override {
    for (auto& p : pools) caf::anon_send_exit(p, caf::exit_reason::user_shutdown);
  }

  environment_actor pool(std::size_t workers, scoring_function f = parity_scoring()) {
    environment_config c;
    c.workers = workers;
    c.score = std::move(f);
    c.execution = engine_execution::inline_calls;
    pools.push_back(spawn_environment(sys, c));
    sched.run();
    return pools.back();
  }

  /// Trajectories whose last tokens are first, first + 1, ...
  static score_job job_of(std::size_t n, std::int32_t first = 0) {
    score_job job;
    for (std::size_t i = 0; i < n; ++i) {
      trajectory t;
      t.id = i;
      t.prompt = {1};
      t.tokens = {7, first + static_cast<std::int32_t>(i)};
      job.trajectories.push_back(t);
    }
    return job;
  }

  score_result score(const environment_actor& env, const score_job& job) {
    score_result out;
    auto h = self->request(env, caf::infinite, score_atom_v, job);
    sched.run();
    h.receive([&](score_result& r) { out = std::move(r); },
              [&](caf::error& e) { CAF_FAIL("scoring failed: " << text_of(e)); });
    return out;
  }
};

std::vector<double> rewards(const score_result& r) {
  std::vector<double> out;
  for (const auto& f : r.feedback) out.push_back(f.reward);
  return out;
}

}  // namespace

CAF_TEST(the parity scoring rewards an even last generated token with 1 and anything else with 0) {
  const scoring_function parity = parity_scoring();
  trajectory t;
  t.prompt = {4};  // the prompt does not count
  CAF_CHECK_EQUAL(parity(t)->reward, 0.0);
  t.tokens = {3, 8};
  CAF_CHECK_EQUAL(parity(t)->reward, 1.0);
  CAF_CHECK(parity(t)->done);
  CAF_CHECK(!parity(t)->next_observation.has_value());
  t.tokens = {8, 3};
  CAF_CHECK_EQUAL(parity(t)->reward, 0.0);
}

CAF_TEST_FIXTURE_SCOPE(environment_tests, fixture)

CAF_TEST(a pool scores every trajectory in job order whatever the split over its workers) {
  auto env = pool(3);
  CAF_CHECK_EQUAL(rewards(score(env, job_of(7))), (std::vector<double>{1, 0, 1, 0, 1, 0, 1}));
  CAF_CHECK_EQUAL(rewards(score(env, job_of(2, 1))), (std::vector<double>{0, 1}));
  CAF_CHECK_EQUAL(rewards(score(env, job_of(1))), (std::vector<double>{1}));
}

CAF_TEST(an empty job is answered with no rewards) {
  auto env = pool(2);
  CAF_CHECK(score(env, score_job{}).feedback.empty());
}

CAF_TEST(a pool without a scoring function refuses every job saying so) {
  auto env = pool(2, scoring_function{});
  auto h = self->request(env, caf::infinite, score_atom_v, job_of(3));
  sched.run();
  h.receive([](score_result&) { CAF_FAIL("an unscored job was answered"); },
            [](caf::error& e) {
              CAF_CHECK(is_tandem_error(e, tandem_errc::invalid_config));
              CAF_CHECK(text_of(e).find("no scoring function") != std::string::npos);
            });
}

CAF_TEST(the next observation of a multi-turn environment reaches the caller) {
  auto env = pool(2, [](const trajectory& t) {
    env_feedback f;
    f.reward = 0.5;
    f.done = false;
    f.next_observation = std::vector<std::int32_t>{t.tokens.back() + 100};
    return f;
  });
  const auto r = score(env, job_of(3, 4));
  CAF_REQUIRE_EQUAL(r.feedback.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    CAF_CHECK(!r.feedback[i].done);
    CAF_REQUIRE(r.feedback[i].next_observation.has_value());
    CAF_CHECK_EQUAL(*r.feedback[i].next_observation, (std::vector<std::int32_t>{104 + static_cast<std::int32_t>(i)}));
  }
}

CAF_TEST_FIXTURE_SCOPE_END()
