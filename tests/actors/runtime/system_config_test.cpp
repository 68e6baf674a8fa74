// The process-wide actor-system configuration: capped scheduler, tandem errors rendered by name.
#define CAF_SUITE system_config
#include "actors/api/errors.hpp"
#include "actors/runtime/system_config.hpp"

#include <caf/all.hpp>
#include <caf/test/dsl.hpp>

namespace {

struct test_config : tandem::system_config {
  test_config() : tandem::system_config(2) {}
};

using fixture = test_coordinator_fixture<test_config>;

}  // namespace

CAF_TEST(scheduler threads are a fair share of the cores and never zero) {
  CAF_CHECK_EQUAL(tandem::scheduler_threads(16, 8), 2u);
  CAF_CHECK_EQUAL(tandem::scheduler_threads(2, 4), 1u);
  CAF_CHECK_EQUAL(tandem::scheduler_threads(2, 0), 2u);
}

CAF_TEST_FIXTURE_SCOPE(system_config_tests, fixture)

CAF_TEST(a tandem error travels through a request and renders with its name and context) {
  auto refuser = sys.spawn([]() -> caf::behavior {
    return {[](int32_t version) -> caf::result<int32_t> {
      return caf::make_error(tandem::tandem_errc::stale_version, "ack for version", version);
    }};
  });
  std::string rendered;
  auto response = self->request(refuser, caf::infinite, int32_t{3});
  sched.run();
  response.receive(
      [](int32_t) { CAF_FAIL("the request should have failed"); },
      [&](caf::error& e) { rendered = sys.render(e); });
  CAF_CHECK_EQUAL(rendered, "tandem: stale_version (\"ack for version\", 3)");
  caf::anon_send_exit(refuser, caf::exit_reason::user_shutdown);
}

CAF_TEST_FIXTURE_SCOPE_END()
