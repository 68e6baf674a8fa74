// The supervisor on virtual time: a silent member is named once the heartbeat timeout passes;
// members that keep beating, or that said goodbye, are not.
#define CAF_SUITE supervisor
#include "actors/supervisor/supervisor.hpp"

#include <caf/all.hpp>
#include <caf/test/dsl.hpp>

#include "actors/runtime/system_config.hpp"

namespace {

struct supervisor_config : tandem::system_config {
  supervisor_config() : tandem::system_config(1) {}
};

struct fixture : test_coordinator_fixture<supervisor_config> {
  tandem::supervisor_actor sup;
  fixture() {
    tandem::supervisor_options opts;
    opts.heartbeat_timeout = std::chrono::seconds(10);
    opts.check_interval = std::chrono::seconds(1);
    sup = sys.spawn(tandem::supervisor, caf::actor_cast<caf::actor>(self), opts);
    sched.run();
  }
  ~fixture() { caf::anon_send_exit(sup, caf::exit_reason::user_shutdown); }

  /// Advances virtual time by one second at a time, `beat` sending a heartbeat for each listed member first.
  void seconds(int n, const std::vector<std::string>& beat) {
    for (int i = 0; i < n; ++i) {
      for (const auto& w : beat) self->send(sup, tandem::heartbeat_atom::value, w);
      sched.run();
      sched.advance_time(std::chrono::seconds(1));
      sched.run();
    }
  }
};

}  // namespace

CAF_TEST_FIXTURE_SCOPE(supervisor_tests, fixture)

CAF_TEST(a member that stops answering is reported by name after the heartbeat timeout) {
  self->send(sup, tandem::watch_atom::value, std::string("policy-0"));
  self->send(sup, tandem::watch_atom::value, std::string("rollout-1"));
  sched.run();
  seconds(10, {"policy-0"});  // rollout-1 silent for 10 s: not yet past the timeout
  CAF_CHECK(self->mailbox().empty());
  seconds(2, {"policy-0"});
  expect((tandem::lost_atom, std::string, std::string), from(sup).to(self).with(_, std::string("rollout-1"), _));
  seconds(20, {"policy-0"});  // reported once, and the beating member never
  CAF_CHECK(self->mailbox().empty());
}

CAF_TEST(a member that said goodbye is not reported) {
  self->send(sup, tandem::watch_atom::value, std::string("rollout-2"));
  self->send(sup, tandem::forget_atom::value, std::string("rollout-2"));
  sched.run();
  seconds(30, {});
  CAF_CHECK(self->mailbox().empty());
}

CAF_TEST(the watched list names every live member) {
  self->send(sup, tandem::watch_atom::value, std::string("b"));
  self->send(sup, tandem::watch_atom::value, std::string("a"));
  sched.run();
  self->send(sup, tandem::watched_atom::value);
  sched.run();
  expect((std::vector<std::string>), from(sup).to(self).with(std::vector<std::string>{"a", "b"}));
}

CAF_TEST_FIXTURE_SCOPE_END()
