// The validation actor with fake engines on CAF's test coordinator: the accuracy of a pass is the
// mean parity reward of the greedy responses recomputed from the weights, its rounds of batch_size
// prompts cover the validation set once, prompt k on rollout worker k % R, a response of another
// version than the one asked for is refused naming the rollout worker, a busy actor refuses a
// second pass, and a member declared lost fails the pass naming it.
#define CAF_SUITE driver_validation
#include "actors/driver/validation.hpp"

#include <memory>
#include <utility>
#include <vector>

#include "support/actor_fixture.hpp"

using namespace tandem;
using namespace tandem::test;

namespace {

/// Stands in front of a rollout worker: the request ids of every job it is sent, in order; with
/// `stale_id`, the response of that id claims the version before the live one (a response kept
/// across a refit by a relay).
rollout_actor recording(caf::actor_system& sys, rollout_actor worker,
                        std::shared_ptr<std::vector<std::vector<std::uint64_t>>> jobs, std::optional<std::uint64_t> stale_id) {
  auto on_job = [jobs](const generate_job& job) {
    std::vector<std::uint64_t> ids;
    for (const auto& r : job.requests) ids.push_back(r.id);
    jobs->push_back(std::move(ids));
  };
  auto edit = [stale_id](generate_result& r) {
    for (auto& t : r.trajectories)
      if (stale_id && t.id == *stale_id && t.weight_version > 0) t.weight_version -= 1;
  };
  return sys.spawn(relaying_rollout, worker, on_job, edit);
}

constexpr std::uint64_t validation_seed = 23;
constexpr std::int32_t validation_tokens = 5;
const std::vector<std::int32_t> validation_stops = {3, 10, 17, 24, 31};  // some responses stop early

struct fixture : cluster_fixture {
  std::vector<std::vector<std::int32_t>> prompts;
  std::vector<std::shared_ptr<std::vector<std::vector<std::uint64_t>>>> jobs;  // by rollout worker
  validation_actor validation;

  /// The cluster, its handshake, and a validation actor over `n` parity prompts in rounds of
  /// `batch_size`, each rollout worker behind a recording stand-in.
  void start_validation(const cluster_options& o, std::size_t n, std::size_t batch_size,
                        std::optional<std::uint64_t> stale_id = std::nullopt) {
    start(o);
    handshake();
    prompts = gpu::parity_prompts(validation_seed, n, tiny_model().vocab);
    validation_config vc;
    for (std::size_t w = 0; w < rollout.size(); ++w) {
      jobs.push_back(std::make_shared<std::vector<std::vector<std::uint64_t>>>());
      vc.rollout.push_back(recording(sys, rollout[w], jobs.back(), stale_id));
    }
    vc.environment = environment;
    vc.prompts = prompts;
    vc.batch_size = batch_size;
    vc.max_new_tokens = validation_tokens;
    vc.stop_tokens = validation_stops;
    vc.seed = validation_seed;
    vc.timeout = std::chrono::seconds(60);
    validation = spawn_validation(sys, vc);
    sched.run();
  }

  ~fixture() override {
    if (validation) caf::anon_send_exit(validation, caf::exit_reason::user_shutdown);
  }

  /// The greedy request of validation prompt k after `step` steps (validation.hpp).
  gpu::generation_request request_of(std::size_t k, std::uint32_t step) const {
    gpu::generation_request r;
    r.id = k;
    r.prompt = prompts[k];
    r.sampling = {0.0, 0, 1.0};
    r.rng = gpu::rng_coordinates{validation_seed, step, validation_round, static_cast<std::uint32_t>(k), 0, 0};
    r.max_new_tokens = validation_tokens;
    r.stop_tokens = validation_stops;
    return r;
  }

  answer<validation_report> validate(weight_version version, std::uint32_t step) {
    return ask<validation_report>(validation, validate_atom_v, version, step);
  }
};

}  // namespace

CAF_TEST_FIXTURE_SCOPE(validation_tests, fixture)

CAF_TEST(the accuracy is the mean parity reward of the greedy responses recomputed from the weights) {
  start_validation({refit_mode::dedicated, 2}, 9, 4);
  auto out = validate(0, 3);
  CAF_REQUIRE(out.value.has_value());
  const validation_report& v = *out.value;
  CAF_CHECK_EQUAL(v.step, 3u);
  CAF_CHECK_EQUAL(v.version, 0u);
  CAF_CHECK_EQUAL(v.prompts, 9u);
  CAF_REQUIRE_EQUAL(v.samples.size(), 9u);
  double reward = 0, length = 0;
  bool some_stopped = false;
  for (std::size_t k = 0; k < prompts.size(); ++k) {
    const auto expected = gpu::fake_generate_engine::expected_tokens(generators[k % 2]->weight_hash(), request_of(k, 3),
                                                                     tiny_model().vocab);
    const validation_sample& s = v.samples[k];
    CAF_CHECK_EQUAL(s.prompt_index, k);
    CAF_CHECK_EQUAL(s.prompt, prompts[k]);
    CAF_CHECK_EQUAL(s.tokens, expected);
    CAF_CHECK_EQUAL(s.reward, gpu::parity_reward(expected));
    reward += gpu::parity_reward(expected);
    length += static_cast<double>(expected.size());
    some_stopped = some_stopped || s.reason == gpu::finish_reason::stop_token;
  }
  CAF_CHECK(some_stopped);  // the lengths differ, so avg_length is not just max_new_tokens
  CAF_CHECK_EQUAL(v.accuracy, reward / 9);
  CAF_CHECK_EQUAL(v.avg_length, length / 9);
  CAF_CHECK(v.accuracy > 0 && v.accuracy < 1);
}

CAF_TEST(rounds of batch_size prompts cover every validation prompt once with prompt k on rollout worker k mod R) {
  start_validation({refit_mode::dedicated, 2}, 7, 3);
  auto out = validate(0, 0);
  CAF_REQUIRE(out.value.has_value());
  CAF_CHECK_EQUAL(out.value->rounds, 3u);
  // rounds {0, 1, 2}, {3, 4, 5}, {6}: the even prompts to rollout-0, the odd ones to rollout-1
  CAF_CHECK_EQUAL(*jobs[0], (std::vector<std::vector<std::uint64_t>>{{0, 2}, {4}, {6}}));
  CAF_CHECK_EQUAL(*jobs[1], (std::vector<std::vector<std::uint64_t>>{{1}, {3, 5}}));
  CAF_REQUIRE_EQUAL(out.value->samples.size(), 7u);
  for (std::size_t k = 0; k < 7; ++k) {
    CAF_CHECK_EQUAL(out.value->samples[k].prompt_index, k);
    CAF_CHECK_EQUAL(out.value->samples[k].worker, "rollout-" + std::to_string(k % 2));
  }
}

CAF_TEST(a batch larger than the set is one round with the responses of any other batching) {
  start_validation({refit_mode::dedicated, 2}, 7, 16);
  auto whole = validate(0, 2);
  CAF_REQUIRE(whole.value.has_value());
  CAF_CHECK_EQUAL(whole.value->rounds, 1u);
  CAF_CHECK_EQUAL(*jobs[0], (std::vector<std::vector<std::uint64_t>>{{0, 2, 4, 6}}));
  for (std::size_t k = 0; k < 7; ++k)
    CAF_CHECK_EQUAL(whole.value->samples[k].tokens,
                    gpu::fake_generate_engine::expected_tokens(generators[k % 2]->weight_hash(), request_of(k, 2),
                                                               tiny_model().vocab));
}

CAF_TEST(a response of an older version than the one asked for is refused naming the rollout worker) {
  start_validation({refit_mode::colocated, 1}, 4, 4, std::uint64_t{2});
  CAF_REQUIRE(run_step().report.has_value());  // v1 live
  auto out = validate(1, 1);
  CAF_REQUIRE(!out.value.has_value());
  CAF_CHECK(is_tandem_error(out.error, tandem_errc::stale_version));
  check_contains(text_of(out.error), "validation after step 1: rollout-0 returned response 2 of v0, v1 was asked for");
}

CAF_TEST(a pass asked for a version the rollout workers do not hold fails naming the worker that refused it) {
  start_validation({refit_mode::dedicated, 2}, 4, 4);
  auto out = validate(1, 1);
  CAF_REQUIRE(!out.value.has_value());
  CAF_CHECK(is_tandem_error(out.error, tandem_errc::stale_version));
  check_contains(text_of(out.error), "validation after step 1: generate on rollout worker 0: rollout-0");
}

CAF_TEST(a validate request while a pass runs is refused with wrong_state) {
  start_validation({refit_mode::dedicated, 2}, 4, 2);
  auto first = self->request(validation, caf::infinite, validate_atom_v, weight_version{0}, std::uint32_t{0});
  expect((validate_atom, weight_version, std::uint32_t), from(self).to(validation));
  auto second = self->request(validation, caf::infinite, validate_atom_v, weight_version{0}, std::uint32_t{0});
  expect((validate_atom, weight_version, std::uint32_t), from(self).to(validation));
  second.receive([](validation_report&) { CAF_FAIL("a second pass was accepted"); },
                 [](caf::error& e) {
                   CAF_CHECK(is_tandem_error(e, tandem_errc::wrong_state));
                   check_contains(text_of(e), "the validation after step 0 is generating");
                 });
  sched.run();
  first.receive([](validation_report& v) { CAF_CHECK_EQUAL(v.prompts, 4u); },
                [](caf::error& e) { CAF_FAIL("the first pass failed: " << text_of(e)); });
}

CAF_TEST(a member declared lost fails the running pass naming it and refuses later passes) {
  start_validation({refit_mode::dedicated, 2}, 4, 2);
  auto h = self->request(validation, caf::infinite, validate_atom_v, weight_version{0}, std::uint32_t{2});
  expect((validate_atom, weight_version, std::uint32_t), from(self).to(validation));
  self->send(validation, member_lost_atom_v, std::string("rollout-1"), std::string("no heartbeat for 10 s"));
  sched.run();
  h.receive([](validation_report&) { CAF_FAIL("the pass succeeded"); },
            [](caf::error& e) {
              CAF_CHECK(is_tandem_error(e, tandem_errc::peer_lost));
              check_contains(text_of(e), "validation after step 2 failed: rollout-1 was lost: no heartbeat for 10 s");
            });
  auto later = validate(0, 2);
  CAF_CHECK(!later.value.has_value());
  CAF_CHECK(is_tandem_error(later.error, tandem_errc::peer_lost));
}

CAF_TEST(the validation messages are in the tandem type-ID block) {
  CAF_CHECK(sys.types().make_value(std::string("tandem::validation_sample")) != nullptr);
  CAF_CHECK(sys.types().make_value(std::string("tandem::validation_report")) != nullptr);
  validation_report v;
  v.step = 4;
  v.version = 4;
  v.prompts = 8;
  v.rounds = 2;
  v.accuracy = 0.625;
  v.avg_length = 3.5;
  CAF_CHECK_EQUAL(to_string(v), "validation_report(after step 4, v4, 8 prompts in 2 rounds, accuracy 0.625, avg length 3.5)");
}

CAF_TEST_FIXTURE_SCOPE_END()
