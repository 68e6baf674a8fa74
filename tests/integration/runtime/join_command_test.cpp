// `tandem join` against a ROUTER socket the test plays the controller on: settings come from
// the environment and flags win; the hello names the rank, world and pid; no welcome, a refused
// hello and a silent parent each end the member with exit 1 and a reason; a welcomed member sends
// heartbeats and answers shutdown with goodbye (exit 0); usage errors name the missing setting.
#include <boost/test/unit_test.hpp>

#include <regex>
#include <sstream>
#include <span>
#include <string>
#include <vector>

#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "orchestration/control/codec.hpp"
#include "process_support.hpp"
#include "tools/cli/commands.h"

namespace control = tandem::control;
using namespace runtime_test;

namespace join_command_test_support {

/// The test's controller: a ROUTER on an ephemeral loopback port.
struct fake_controller {
  zmq::context_t context{1};
  zmq::socket_t router{context, zmq::socket_type::router};
  std::string endpoint;

  fake_controller() {
    router.set(zmq::sockopt::linger, 0);
    router.bind("tcp://127.0.0.1:*");
    endpoint = router.get(zmq::sockopt::last_endpoint);
  }

  /// The next message (routing id, decoded) within the deadline.
  std::optional<std::pair<std::string, control::message>> receive() {
    std::optional<std::pair<std::string, control::message>> got;
    eventually([&] {
      std::vector<zmq::message_t> parts;
      if (!zmq::recv_multipart(router, std::back_inserter(parts), zmq::recv_flags::dontwait)) return false;
      if (parts.size() != 2) return false;
      auto decoded = control::decode(std::span<const std::byte>(parts[1].data<std::byte>(), parts[1].size()));
      if (decoded) got.emplace(parts[0].to_string(), decoded.value());
      return got.has_value();
    });
    return got;
  }

  /// The next message of type M from `peer`, skipping others (heartbeats).
  template <class M>
  std::optional<M> receive_a(const std::string& peer) {
    for (int i = 0; i < 1000; ++i) {
      auto got = receive();
      if (!got) return std::nullopt;
      if (got->first != peer) continue;
      if (const auto* m = std::get_if<M>(&got->second)) return *m;
    }
    return std::nullopt;
  }

  void send(const std::string& peer, const control::message& m) {
    const control::frame f = control::encode(m).value();
    router.send(zmq::buffer(peer), zmq::send_flags::sndmore);
    router.send(zmq::buffer(f.data(), f.size()), zmq::send_flags::none);
  }
};

/// Environment variables a member reads, cleared so the test's own environment cannot leak in.
const std::vector<std::string> member_variables = {"TANDEM_CONTROLLER",         "TANDEM_RANK",  "TANDEM_WORLD",
                                                   "TANDEM_LOCAL_MEMBERS",      "TANDEM_PARENT_PID",
                                                   "TANDEM_WELCOME_TIMEOUT_MS", "TANDEM_KEYS", "TANDEM_KEYS_FD"};

}  // namespace join_command_test_support

using namespace join_command_test_support;

BOOST_AUTO_TEST_SUITE(join_command_test)

BOOST_AUTO_TEST_CASE(a_member_configured_by_the_environment_says_hello_and_exits_when_no_welcome_comes) {
  fake_controller c;
  child_process w({tandem_binary, "join", "--welcome-timeout-ms", "1000"},
                  {{"TANDEM_CONTROLLER", c.endpoint}, {"TANDEM_RANK", "2"}, {"TANDEM_WORLD", "3"}}, member_variables);
  const auto hello = c.receive_a<control::hello>("w2");
  BOOST_TEST_REQUIRE(hello.has_value(), w.output());
  BOOST_TEST(hello->rank == 2);
  BOOST_TEST(hello->world_size == 3);
  BOOST_TEST(hello->pid == w.pid());
  BOOST_TEST(hello->version == control::protocol_version);
  BOOST_TEST(!hello->hostname.empty());
  BOOST_TEST(w.exit_code() == 1, w.output());
  BOOST_TEST(
      w.err().find("tandem member 2: no welcome from the controller at " + c.endpoint + " within 1000 ms") != std::string::npos,
      w.output());
}

BOOST_AUTO_TEST_CASE(flags_win_over_the_environment_and_a_refused_hello_ends_the_member_with_the_reason) {
  fake_controller c;
  child_process w({tandem_binary, "join", "--controller", c.endpoint, "--rank", "0", "--world=2"},
                  {{"TANDEM_CONTROLLER", "tcp://127.0.0.1:1"}, {"TANDEM_RANK", "2"}, {"TANDEM_WORLD", "3"}}, member_variables);
  const auto hello = c.receive_a<control::hello>("w0");
  BOOST_TEST_REQUIRE(hello.has_value(), w.output());
  BOOST_TEST(hello->rank == 0);
  BOOST_TEST(hello->world_size == 2);
  c.send("w0", control::error{3, "it was started for a world of 2 members; this run has 4", 0});
  BOOST_TEST(w.exit_code() == 1, w.output());
  BOOST_TEST(w.err().find("refused this member: it was started for a world of 2 members; this run has 4") != std::string::npos,
             w.output());
}

BOOST_AUTO_TEST_CASE(a_welcomed_member_sends_heartbeats_and_answers_shutdown_with_goodbye) {
  fake_controller c;
  child_process w({tandem_binary, "join", "--controller", c.endpoint, "--rank", "1", "--world", "2"}, {}, member_variables);
  BOOST_TEST_REQUIRE(c.receive_a<control::hello>("w1").has_value(), w.output());
  control::welcome welcome;
  welcome.assigned = {false, true};
  welcome.rollout_rank = 0;
  welcome.rollout_size = 1;
  welcome.run_id = "test-run";
  welcome.heartbeat_interval_ms = 100;
  welcome.heartbeat_timeout_ms = 20000;
  c.send("w1", welcome);
  for (std::uint64_t expected = 0; expected < 2; ++expected) {
    const auto beat = c.receive_a<control::heartbeat>("w1");
    BOOST_TEST_REQUIRE(beat.has_value(), w.output());
    BOOST_TEST(beat->sender_rank == 1);
    BOOST_TEST(beat->sequence == expected);
    c.send("w1", control::heartbeat{-1, expected});
  }
  c.send("w1", control::shutdown{"the test is over"});
  const auto goodbye = c.receive_a<control::goodbye>("w1");
  BOOST_TEST_REQUIRE(goodbye.has_value(), w.output());
  BOOST_TEST(goodbye->rank == 1);
  BOOST_TEST(goodbye->reason == "shut down: the test is over");
  BOOST_TEST(w.exit_code() == 0, w.output());
  BOOST_TEST(w.err().find("tandem member 1: joined run test-run as rollout-0") != std::string::npos, w.output());
  BOOST_TEST(w.err().find("tandem member 1: shut down by the controller (the test is over) after 2 controller heartbeats") !=
                 std::string::npos,
             w.output());
}

BOOST_AUTO_TEST_CASE(a_member_shut_down_because_the_run_failed_says_goodbye_and_exits_with_1) {
  fake_controller c;
  child_process w({tandem_binary, "join", "--controller", c.endpoint, "--rank", "0", "--world", "1"}, {}, member_variables);
  BOOST_TEST_REQUIRE(c.receive_a<control::hello>("w0").has_value(), w.output());
  control::welcome welcome;
  welcome.assigned = {false, true};
  welcome.rollout_size = 1;
  welcome.run_id = "failing-run";
  welcome.heartbeat_interval_ms = 100;
  welcome.heartbeat_timeout_ms = 20000;
  c.send("w0", welcome);
  BOOST_TEST_REQUIRE(c.receive_a<control::heartbeat>("w0").has_value(), w.output());
  c.send("w0", control::shutdown{"the run failed: member 1 [rollout-1] (pid 7 on n2) exited with status 1", true});
  const auto goodbye = c.receive_a<control::goodbye>("w0");
  BOOST_TEST_REQUIRE(goodbye.has_value(), w.output());
  BOOST_TEST(goodbye->reason == "shut down: the run failed: member 1 [rollout-1] (pid 7 on n2) exited with status 1");
  BOOST_TEST(w.exit_code() == 1, w.output());
  BOOST_TEST(w.err().find("tandem member 0: shut down by the controller (the run failed: member 1") != std::string::npos,
             w.output());
}

BOOST_AUTO_TEST_CASE(a_member_whose_spawning_controller_is_gone_exits_at_once) {
  fake_controller c;
  // TANDEM_PARENT_PID names a process that is not the member's parent (this test is).
  child_process w({tandem_binary, "join", "--controller", c.endpoint, "--rank", "0", "--world", "1"},
                  {{"TANDEM_PARENT_PID", "1"}}, member_variables);
  BOOST_TEST(w.exit_code() == 1, w.output());
  BOOST_TEST(w.err().find("tandem member 0: the controller (pid 1) that started this member is gone") != std::string::npos,
             w.output());
}

BOOST_AUTO_TEST_CASE(a_member_started_by_hand_joins_a_controller_that_spawned_the_others_and_leaves_with_them) {
  // As a launcher would: the controller starts ranks 0-2 itself and waits for rank 3.
  // The run's keys come from a file both read (TANDEM_KEYS), as a launcher would hand them out.
  const keys_file keys(4);
  child_process h(harness_args({"--spawn", "3", "--seconds", "2", "--heartbeat-interval-ms", "200"}), {keys.variable()});
  const auto endpoint = h.await_out(std::regex("controller listening on (tcp://[0-9.:]+)"));
  BOOST_TEST_REQUIRE(endpoint.has_value(), h.output());
  child_process w({tandem_binary, "join"},
                  {{"TANDEM_CONTROLLER", *endpoint}, {"TANDEM_RANK", "3"}, {"TANDEM_WORLD", "4"}, keys.variable()},
                  member_variables);
  BOOST_TEST(h.exit_code() == 0, h.output());
  BOOST_TEST(w.exit_code() == 0, w.output());
  BOOST_TEST(member_pids(h.out()).size() == 3u, h.output());
  BOOST_TEST(std::regex_search(h.out(), std::regex("member 3 \\[rollout-1\\] \\(pid " + std::to_string(w.pid()) +
                                                   " on [^)]+\\) left after [1-9][0-9]* heartbeats \\(said goodbye\\)")),
             h.output());
}

BOOST_AUTO_TEST_CASE(a_usage_error_names_the_missing_or_malformed_setting) {
  for (const auto& v : member_variables) ::unsetenv(v.c_str());
  const auto cli = [](const std::vector<std::string>& a) {
    std::ostringstream out, err;
    const int code = tandem::cli::run_cli(a, out, err);
    return std::make_pair(code, err.str());
  };
  auto [code, err] = cli({"join", "--rank", "1", "--world", "2"});
  BOOST_TEST(code == 2);
  BOOST_TEST(err ==
             "tandem join: missing the controller's address (--controller or TANDEM_CONTROLLER; see `tandem help join`)\n");
  std::tie(code, err) = cli({"join", "--controller", "tcp://127.0.0.1:1", "--world", "2"});
  BOOST_TEST(code == 2);
  BOOST_TEST(err == "tandem join: missing the member's rank (--rank or TANDEM_RANK; see `tandem help join`)\n");
  ::setenv("TANDEM_WORLD", "two", 1);
  std::tie(code, err) = cli({"join", "--controller", "tcp://127.0.0.1:1", "--rank", "0"});
  ::unsetenv("TANDEM_WORLD");
  BOOST_TEST(code == 2);
  BOOST_TEST(err == "tandem join: TANDEM_WORLD: 'two' is not an integer\n");
  std::tie(code, err) = cli({"join", "--controller", "tcp://127.0.0.1:1", "--rank", "0", "--world", "1", "--frob", "1"});
  BOOST_TEST(code == 2);
  BOOST_TEST(err.starts_with("tandem join: unknown argument '--frob'"));
  std::ostringstream out, help_err;
  BOOST_TEST(tandem::cli::run_cli({"help", "join"}, out, help_err) == 0);
  BOOST_TEST(out.str().starts_with("usage: tandem join --controller ADDR --rank R --world W\n"));
}

BOOST_AUTO_TEST_SUITE_END()
