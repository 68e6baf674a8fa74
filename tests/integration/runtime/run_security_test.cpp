// A run's sockets belong to the run: the attacks a local process could make on loopback, each
// made while a run goes on (attackers.hpp). With cluster.secure (CurveZMQ) each is refused with
// a logged reason and the run ends with the right weights (every trajectory recomputed from the
// weights of the version it names, run_checks.hpp); garbage and oversized frames leave an
// insecure run alive too. Peer-supplied text reaches the logs escaped.
#include <boost/test/unit_test.hpp>

#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "attackers.hpp"
#include "orchestration/control/codec.hpp"
#include "run_checks.hpp"
#include "tools/cli/commands.h"

namespace control = tandem::control;
using namespace runtime_test;

namespace run_security_test_support {

const std::regex controller_line("controller listening on (tcp://[0-9.:]+)");
std::regex refit_port_of(int member) {
  return std::regex("tandem member " + std::to_string(member) + ": data plane bound to .*refit (tcp://[0-9.:]+)");
}
const std::regex any_data_port("data plane bound to [a-z-]+ (tcp://[0-9.:]+)");
const std::regex second_data_port("data plane bound to [a-z-]+ tcp://[0-9.:]+, [a-z-]+ (tcp://[0-9.:]+)");

/// A plain (non-CURVE) peer's refusal was logged with its reason: the mechanism mismatch, or the
/// reset the server saw first when the client noticed the mismatch before it (timing decides).
bool refused_plainly(const std::string& log) {
  return log.find("the peer does not speak CurveZMQ") != std::string::npos ||
         std::regex_search(log, std::regex("refused the connection from [0-9.:]+ to the [a-z]+ socket tcp://[0-9.:]+: the "
                                           "handshake failed: "));
}

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

/// The recipe, short: a dedicated run of 2 policy and 2 rollout workers, 2 MiB of fake weights in
/// 1 MiB buckets.
std::vector<std::string> dedicated_overrides(bool checksums) {
  return {"runtime.fake_weight_mb=2", "policy.refit.bucket_mb=1",
          std::string("policy.refit.checksums=") + (checksums ? "true" : "false")};
}

/// Waits for the next control message of type M on `s`, answering nothing else.
template <class M>
std::optional<M> next_of(zmq::socket_t& s) {
  std::optional<M> got;
  eventually([&] {
    zmq::message_t body;
    while (s.recv(body, zmq::recv_flags::dontwait)) {
      auto m = control::decode(std::span<const std::byte>(body.data<std::byte>(), body.size()));
      if (m && std::holds_alternative<M>(m.value())) {
        got = std::get<M>(m.value());
        return true;
      }
    }
    return false;
  });
  return got;
}

}  // namespace run_security_test_support

using namespace run_security_test_support;

BOOST_AUTO_TEST_SUITE(run_security_test)

BOOST_AUTO_TEST_CASE(forged_weight_buckets_from_strangers_claiming_the_roots_routing_id_never_go_live) {
  for (const bool checksums : {false, true}) {
    BOOST_TEST_CONTEXT("policy.refit.checksums: " << checksums) {
      const keys_file keys(4);  // so the strangers know the ports' public keys, as a sniffer would
      std::shared_ptr<attacker> a;
      const std::string err = check_run(
          dedicated_recipe, dedicated_overrides(checksums), 3, 2, {keys.variable()}, [&](child_process& run) {
            a = std::make_shared<attacker>(
                run, std::vector<target_pattern>{{refit_port_of(2), {attack::forged_bucket}, keys.keys.members[2].public_key},
                                                 {refit_port_of(3), {attack::forged_bucket}, keys.keys.members[3].public_key}});
            return std::shared_ptr<void>(a);
          });
      BOOST_TEST(a->ports() == 2u, "the attacker found " << a->ports() << " refit ports\n" << err);
      BOOST_TEST(a->made() >= 4u, err);
      // Refused at the handshake, with the reason: a plain socket does not speak CurveZMQ, a
      // stranger's key is not one of the run's.
      BOOST_TEST(err.find("refit port: refused a handshake from 127.0.0.1 on tandem-data-") != std::string::npos, err);
      BOOST_TEST(err.find("is not one of this run's") != std::string::npos, err);
      BOOST_TEST(refused_plainly(err), err);
    }
  }
}

BOOST_AUTO_TEST_CASE(impostor_hellos_racing_the_spawned_members_are_refused_and_the_spawned_members_join) {
  const keys_file keys(4);
  child_process h(harness_args({"--seconds", "2", "--heartbeat-interval-ms", "200"}), {keys.variable()});
  attacker a(h, {{controller_line, {attack::impostor_hello}, keys.keys.controller.public_key}});
  const auto pids = start_and_join(h);
  BOOST_TEST_REQUIRE(pids.size() == 4u, h.output());
  BOOST_TEST(h.exit_code() == 0, h.output());
  a.stop();
  BOOST_TEST(a.made() >= 8u, h.output());
  const std::string out = h.out(), err = h.err();
  for (const auto& [rank, pid] : pids)  // each rank joined as the process spawned for it
    BOOST_TEST(std::regex_search(out, std::regex("member " + std::to_string(rank) + " \\[[^\\]]+\\] \\(pid " +
                                                 std::to_string(pid) + " on [^)]+\\) joined")),
               h.output());
  BOOST_TEST(out.find("impostor") == std::string::npos, h.output());
  BOOST_TEST(err.find("tandem controller: refused a handshake from 127.0.0.1 on tandem-control: client key") !=
                 std::string::npos,
             h.output());
  BOOST_TEST(err.find("to the control socket tcp://127.0.0.1:") != std::string::npos, h.output());
}

BOOST_AUTO_TEST_CASE(an_impostor_hello_before_the_launched_members_is_refused_and_they_join) {
  const keys_file keys(4);
  child_process h(harness_args({"--spawn", "0", "--seconds", "2", "--heartbeat-interval-ms", "200"}), {keys.variable()});
  const auto endpoint = h.await_out(controller_line);
  BOOST_TEST_REQUIRE(endpoint.has_value(), h.output());
  {
    attacker a(h, {{controller_line, {attack::impostor_hello}, keys.keys.controller.public_key}});
    BOOST_TEST_REQUIRE(eventually([&] { return count_of(h.err(), "refused a handshake from 127.0.0.1 on tandem-control") >= 4; }),
                       h.output());
  }
  std::vector<std::unique_ptr<child_process>> members;
  for (int r = 0; r < 4; ++r)
    members.push_back(std::make_unique<child_process>(
        std::vector<std::string>{tandem_binary, "join"},
        std::vector<std::pair<std::string, std::string>>{
            {"TANDEM_CONTROLLER", *endpoint}, {"TANDEM_RANK", std::to_string(r)}, {"TANDEM_WORLD", "4"}, keys.variable()}));
  BOOST_TEST(h.exit_code() == 0, h.output());
  for (auto& w : members) BOOST_TEST(w->exit_code() == 0, w->output());
  BOOST_TEST(h.out().find("all 4 members joined") != std::string::npos, h.output());
}

BOOST_AUTO_TEST_CASE(random_bytes_and_oversized_frames_to_the_controller_and_the_data_ports_leave_the_run_alive) {
  const std::vector<attack> garbage = {attack::raw_random, attack::random_frame, attack::oversized};
  for (const bool secure : {true, false}) {
    BOOST_TEST_CONTEXT("cluster.secure: " << secure) {
      std::vector<std::string> overrides = dedicated_overrides(true);
      if (!secure) overrides.push_back("cluster.secure=false");
      std::shared_ptr<attacker> a;
      const std::string err = check_run(dedicated_recipe, overrides, 3, 2, {}, [&](child_process& run) {
        a = std::make_shared<attacker>(run, std::vector<target_pattern>{{controller_line, garbage, ""},
                                                                        {any_data_port, garbage, ""},
                                                                        {second_data_port, garbage, ""}});
        return std::shared_ptr<void>(a);
      });
      BOOST_TEST(a->ports() >= 3u, "the attacker found " << a->ports() << " ports\n" << err);
      BOOST_TEST(a->made() >= 9u, err);
      if (secure) {
        BOOST_TEST(err.find("before its handshake completed") != std::string::npos, err);
        BOOST_TEST(refused_plainly(err), err);
      } else {
        BOOST_TEST(err.find("cluster.secure is false") != std::string::npos, err);
      }
    }
  }
}

/// The peak resident memory of `pid` in bytes (VmHWM), 0 when unreadable.
std::size_t peak_memory(pid_t pid) {
  const std::string status = read_text("/proc/" + std::to_string(pid) + "/status");
  std::smatch m;
  return std::regex_search(status, m, std::regex(R"(VmHWM:\s+([0-9]+) kB)")) ? std::stoull(m[1].str()) * 1024 : 0;
}

BOOST_AUTO_TEST_CASE(eight_peers_sending_250_mb_frames_do_not_swell_the_controller) {
  // The controller's frame limit follows the recipe (16 MiB for this one): a stranger's frame is
  // refused from its header, before ZeroMQ holds more than that per connection.
  std::size_t peak = 0;
  std::shared_ptr<attacker> a;
  const std::string out = check_run(dedicated_recipe, dedicated_overrides(false), 3, 2, {}, [&](child_process& run) {
    a = std::make_shared<attacker>(run, std::vector<target_pattern>{{controller_line, {attack::big_frames}, ""}});
    // Waits for two rounds of eight while the run goes on, then reads the controller's peak.
    eventually([&] { return a->made() >= 16 || run.wait_exit(std::chrono::milliseconds(0)).has_value(); });
    peak = peak_memory(run.pid());
    return std::shared_ptr<void>(a);
  });
  BOOST_TEST(a->made() >= 16u, out);
  BOOST_TEST(peak > 0u, out);
  BOOST_TEST(peak < std::size_t{400} << 20, "the controller peaked at " << (peak >> 20) << " MiB\n" << out);
  BOOST_TEST(out.find("before its handshake completed") != std::string::npos, out);
}

BOOST_AUTO_TEST_CASE(a_hostname_with_newlines_and_terminal_escapes_reaches_every_log_line_escaped) {
  // The test plays rank 3 with its key (only a holder of the run's keys can send a hello at all),
  // joins with a hostname that would forge lines and clear the terminal, then leaves on shutdown.
  const keys_file keys(4);
  child_process h(harness_args({"--spawn", "3", "--seconds", "1", "--heartbeat-interval-ms", "200"}), {keys.variable()});
  const auto endpoint = h.await_out(controller_line);
  BOOST_TEST_REQUIRE(endpoint.has_value(), h.output());
  zmq::context_t context(1);
  zmq::socket_t me = dealer_to(context, *endpoint, "w3", keys.keys.members[3], keys.keys.controller.public_key);
  const std::string evil = "node\ntandem controller: the run ended after 1 ms; all 4 members left\x1b[2J\x1b]0;owned\x07";
  control::hello hello;
  hello.rank = 3;
  hello.world_size = 4;
  hello.pid = 4242;
  hello.hostname = evil;
  const auto f = control::encode(hello).value();
  me.send(zmq::buffer(f.data(), f.size()), zmq::send_flags::none);
  BOOST_TEST_REQUIRE(next_of<control::welcome>(me).has_value(), h.output());
  const auto beat = control::encode(control::heartbeat{3, 0}).value();
  me.send(zmq::buffer(beat.data(), beat.size()), zmq::send_flags::none);
  BOOST_TEST_REQUIRE(next_of<control::shutdown>(me).has_value(), h.output());
  const auto bye = control::encode(control::goodbye{3, "the test leaves"}).value();
  me.send(zmq::buffer(bye.data(), bye.size()), zmq::send_flags::none);
  BOOST_TEST(h.exit_code() == 0, h.output());

  const std::string out = h.out(), err = h.err();
  const std::string escaped = "node\\ntandem controller: the run ended after 1 ms; all 4 members left\\x1b[2J\\x1b]0;owned\\x07";
  BOOST_TEST(out.find("member 3 [rollout-1] (pid 4242 on " + escaped + ") joined") != std::string::npos, h.output());
  BOOST_TEST(out.find('\x1b') == std::string::npos, h.output());
  BOOST_TEST(err.find('\x1b') == std::string::npos, h.output());
  BOOST_TEST(out.find("\ntandem controller: the run ended after 1 ms") == std::string::npos, h.output());
  BOOST_TEST(err.find("\ntandem controller: the run ended after 1 ms") == std::string::npos, h.output());
}

BOOST_AUTO_TEST_CASE(spawned_members_get_their_keys_on_a_descriptor_never_on_the_command_line_or_in_the_environment) {
  const keys_file keys(4);
  child_process h(harness_args({"--seconds", "2", "--heartbeat-interval-ms", "200"}), {keys.variable()});
  const auto pids = start_and_join(h);
  BOOST_TEST_REQUIRE(pids.size() == 4u, h.output());
  for (const auto& [rank, pid] : pids) {
    const std::string proc = "/proc/" + std::to_string(pid);
    const std::string cmdline = read_text(proc + "/cmdline"), environment = read_text(proc + "/environ");
    BOOST_TEST(environment.find(std::string("TANDEM_KEYS_FD=3") + '\0') != std::string::npos, "member " << rank);
    for (const auto& k : keys.keys.members) {
      BOOST_TEST(cmdline.find(k.secret_key) == std::string::npos, "member " << rank);
      BOOST_TEST(environment.find(k.secret_key) == std::string::npos, "member " << rank);
    }
    BOOST_TEST(environment.find(keys.keys.controller.secret_key) == std::string::npos, "member " << rank);
    // The descriptor (an anonymous memory file) was read and closed once the member had its keys.
    std::error_code ec;
    for (const auto& fd : std::filesystem::directory_iterator(proc + "/fd", ec)) {
      const auto target = std::filesystem::read_symlink(fd.path(), ec);
      BOOST_TEST(target.string().find("tandem-keys") == std::string::npos,
                 "member " << rank << " still holds its keys descriptor (" << fd.path() << " -> " << target << ")");
    }
  }
  BOOST_TEST(h.exit_code() == 0, h.output());
}

BOOST_AUTO_TEST_CASE(a_member_holding_another_runs_keys_is_refused_and_says_why) {
  const keys_file ours(4), theirs(4);
  child_process h(harness_args({"--spawn", "3", "--seconds", "1", "--join-timeout-ms", "8000"}), {ours.variable()});
  const auto endpoint = h.await_out(controller_line);
  BOOST_TEST_REQUIRE(endpoint.has_value(), h.output());
  child_process w({tandem_binary, "join", "--welcome-timeout-ms", "3000"},
                  {{"TANDEM_CONTROLLER", *endpoint}, {"TANDEM_RANK", "3"}, {"TANDEM_WORLD", "4"}, theirs.variable()});
  BOOST_TEST(w.exit_code() == 1, w.output());
  BOOST_TEST(w.err().find("tandem member 3: the handshake with the controller at " + *endpoint) != std::string::npos, w.output());
  BOOST_TEST(w.err().find("no welcome from the controller") != std::string::npos, w.output());
  BOOST_TEST(h.exit_code() == 1, h.output());  // rank 3 never joined
  // Its hello box was sealed for the other run's controller key: refused before ZAP is asked.
  BOOST_TEST(h.err().find("to the control socket " + *endpoint + ": a CURVE message failed its cryptographic check") !=
                 std::string::npos,
             h.output());
}

BOOST_AUTO_TEST_CASE(an_insecure_run_is_refused_unless_every_address_is_loopback) {
  std::ostringstream out, err;
  const int code = tandem::cli::run_cli({"run", dedicated_recipe, "runtime.engine=fake", "cluster.secure=false",
                                         "cluster.controller_host=10.1.2.3"},
                                        out, err);
  BOOST_TEST(code == 1);
  BOOST_TEST(err.str().find("cluster.secure: false is accepted only when every address is loopback, but "
                            "cluster.controller_host is 10.1.2.3") != std::string::npos,
             err.str());
  // A member without keys never dials a controller elsewhere.
  child_process w({tandem_binary, "join", "--controller", "tcp://10.1.2.3:29650", "--rank", "0", "--world", "1"}, {},
                  {"TANDEM_KEYS", "TANDEM_KEYS_FD"});
  BOOST_TEST(w.exit_code() == 2, w.output());
  BOOST_TEST(w.err().find("no run keys (TANDEM_KEYS or TANDEM_KEYS_FD) and the controller tcp://10.1.2.3:29650 is not on "
                          "loopback") != std::string::npos,
             w.output());
}

BOOST_AUTO_TEST_SUITE_END()
