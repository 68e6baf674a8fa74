// The external environment (actors/environment/external_environment.hpp): a reward process over
// JSON lines scores like the built-in parity environment, and a process that hangs, answers
// garbage, gives a non-finite reward or exits fails the trajectory with an error naming the
// command, the trajectory and its prompt; after a failure the next trajectory gets a fresh process.
#define CAF_SUITE external_environment
#include "actors/environment/external_environment.hpp"

#include <caf/test/dsl.hpp>

#include "actors/api/error_context.hpp"
#include "gpu/engine/parity_task.h"

using namespace tandem;

namespace {

trajectory sample(std::uint64_t id, std::vector<std::int32_t> tokens) {
  trajectory t;
  t.id = id;
  t.prompt_index = static_cast<std::uint32_t>(id / 2);
  t.sample_index = static_cast<std::uint32_t>(id % 2);
  t.prompt = {2, 7, 9};
  t.tokens = std::move(tokens);
  t.reason = gpu::finish_reason::length;
  return t;
}

scoring_function external(const std::string& command, std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  external_environment_settings s;
  s.command = command;
  s.timeout = timeout;
  s.processes = 2;
  return external_scoring(s);
}

std::string failure_of(const scoring_function& f, const trajectory& t) {
  const auto r = f(t);
  CAF_REQUIRE(!r);
  return error_text(r.error());
}

const std::string example = std::string("python3 ") + TANDEM_SOURCE_DIR + "/tools/external_reward_example.py";

}  // namespace

CAF_TEST(the example reward process scores every trajectory as the parity environment does) {
  const auto f = external(example);
  for (std::uint64_t id = 0; id < 8; ++id) {
    const trajectory t = sample(id, {static_cast<std::int32_t>(3 + id), static_cast<std::int32_t>(id * 5)});
    const auto r = f(t);
    CAF_REQUIRE(r);
    CAF_CHECK_EQUAL(r->reward, gpu::parity_reward(t.tokens));
    CAF_CHECK(r->done);
  }
  CAF_CHECK_EQUAL(f(sample(9, {}))->reward, 0.0);  // an empty response
}

CAF_TEST(a process that hangs past the timeout fails the step naming the trajectory and its prompt) {
  const auto f = external("sleep 30", std::chrono::milliseconds(300));
  CAF_CHECK_EQUAL(failure_of(f, sample(7, {4})),
                  "external environment `sleep 30`: trajectory 7 (prompt 3, sample 1): no answer within 300 ms (the "
                  "process was killed by signal 9)");
}

CAF_TEST(garbage a non finite reward a missing reward and an exit are refused by name) {
  CAF_CHECK_EQUAL(failure_of(external("while read l; do echo nope; done"), sample(4, {1})),
                  "external environment `while read l; do echo nope; done`: trajectory 4 (prompt 2, sample 0): the answer "
                  "is not a JSON object; it answered: nope");
  CAF_CHECK_EQUAL(failure_of(external("while read l; do echo '{\"reward\": 1e999}'; done"), sample(4, {1})),
                  "external environment `while read l; do echo '{\"reward\": 1e999}'; done`: trajectory 4 (prompt 2, "
                  "sample 0): the reward is not finite; it answered: {\"reward\": 1e999}");
  CAF_CHECK_EQUAL(failure_of(external("while read l; do echo '{\"score\": 1}'; done"), sample(4, {1})),
                  "external environment `while read l; do echo '{\"score\": 1}'; done`: trajectory 4 (prompt 2, sample 0): "
                  "the answer has no number \"reward\"; it answered: {\"score\": 1}");
  CAF_CHECK_EQUAL(failure_of(external("read l; exit 3"), sample(5, {1})),
                  "external environment `read l; exit 3`: trajectory 5 (prompt 2, sample 1): its output ended before an "
                  "answer (the process exited with status 3)");
}

CAF_TEST(after a failure the next trajectory gets a fresh process) {
  // The process answers its first line and exits: each trajectory after a failure restarts it.
  const auto f = external("read l; echo '{\"reward\": 0.5}'");
  CAF_CHECK_EQUAL(f(sample(0, {1}))->reward, 0.5);
  CAF_CHECK(!f(sample(1, {1})));  // the same process: it has exited
  CAF_CHECK_EQUAL(f(sample(2, {1}))->reward, 0.5);
}
