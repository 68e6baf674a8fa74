// The controller and four `tandem join` processes on loopback, end to end: they join (hello,
// welcome), exchange heartbeats both ways and shut down cleanly; frames that are garbage, of
// another protocol version, of an unknown kind or wrongly framed, and hellos that do not fit the
// run, are refused with a logged reason while the run goes on.
#include <boost/test/unit_test.hpp>

#include <array>
#include <regex>
#include <span>
#include <string>

#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "orchestration/control/codec.hpp"
#include "process_support.hpp"

namespace control = tandem::control;
using namespace runtime_test;

namespace controller_lifecycle_test_support {

/// A frame of `m` with its header's version (bytes 4-5) and kind (bytes 6-7) replaced.
template <class M>
control::frame patched(const M& m, std::uint16_t version, std::uint16_t kind) {
  control::frame f = control::encode(m).value();
  f[4] = std::byte(version & 0xff);
  f[5] = std::byte(version >> 8);
  f[6] = std::byte(kind & 0xff);
  f[7] = std::byte(kind >> 8);
  return f;
}

/// The count N in `pattern`'s first group, or -1 when `text` does not match.
long number_in(const std::string& text, const std::string& pattern) {
  std::smatch m;
  return std::regex_search(text, m, std::regex(pattern)) ? std::stol(m[1].str()) : -1;
}

/// The control message answered to `socket` within the deadline, if any.
std::optional<control::message> receive(zmq::socket_t& socket) {
  std::optional<control::message> got;
  eventually([&] {
    zmq::message_t body;
    if (!socket.recv(body, zmq::recv_flags::dontwait)) return false;
    auto decoded = control::decode(std::span<const std::byte>(body.data<std::byte>(), body.size()));
    if (decoded) got = decoded.value();
    return true;
  });
  return got;
}

}  // namespace controller_lifecycle_test_support

using namespace controller_lifecycle_test_support;

BOOST_AUTO_TEST_SUITE(controller_lifecycle_test)

BOOST_AUTO_TEST_CASE(a_controller_and_four_members_join_exchange_heartbeats_and_shut_down_cleanly) {
  child_process h(harness_args({"--seconds", "2", "--heartbeat-interval-ms", "200"}));
  const auto pids = start_and_join(h);
  BOOST_TEST_REQUIRE(pids.size() == 4u, h.output());
  BOOST_TEST_REQUIRE(h.exit_code() == 0, h.output());
  const std::string out = h.out(), err = h.err();
  BOOST_TEST(out.ends_with("\nok\n"), h.output());
  for (const auto& [rank, pid] : pids) {
    const std::string r = std::to_string(rank), p = std::to_string(pid);
    // Joined with the pid it was spawned as; the controller heard its heartbeats, it heard the controller's.
    BOOST_TEST(std::regex_search(out, std::regex("member " + r + " \\[[a-z0-9, -]+\\] \\(pid " + p + " on [^)]+\\) joined")),
               h.output());
    BOOST_TEST(number_in(out, "member " + r + " \\[[^\\]]+\\] \\(pid " + p +
                                  " on [^)]+\\) left after ([0-9]+) heartbeats \\(exited with status 0\\)") >= 1,
               h.output());
    BOOST_TEST(number_in(err, "tandem member " + r +
                                  ": shut down by the controller \\(the run ended\\) after ([0-9]+) controller heartbeats") >= 1,
               h.output());
    BOOST_TEST(gone(pid), "member " << r << " (pid " << pid << ") still runs after the controller exited");
  }
  BOOST_TEST(out.find("member 0 [policy-0]") != std::string::npos, h.output());
  BOOST_TEST(out.find("member 3 [rollout-1]") != std::string::npos, h.output());
  BOOST_TEST(err.find("refused") == std::string::npos, h.output());
}

BOOST_AUTO_TEST_CASE(garbage_and_version_mismatched_frames_are_refused_with_a_logged_reason_and_the_run_goes_on) {
  // Only a holder of one of the run's keys gets past the handshake to the codec: here the test
  // itself, as rank 3 (which it starts by hand once it is done).
  const keys_file keys(4);
  child_process h(harness_args({"--spawn", "3", "--seconds", "4", "--heartbeat-interval-ms", "200"}), {keys.variable()});
  const auto endpoint = h.await_out(std::regex("controller listening on (tcp://[0-9.:]+)"));
  BOOST_TEST_REQUIRE(endpoint.has_value(), h.output());

  zmq::context_t context(1);
  zmq::socket_t intruder = dealer_to(context, *endpoint, "w3", keys.keys.members[3], keys.keys.controller.public_key);
  const auto send = [&](const control::frame& f) { intruder.send(zmq::buffer(f.data(), f.size()), zmq::send_flags::none); };
  const std::string garbage = "this is not a frame";
  const control::frame version_2 = patched(control::heartbeat{7, 0}, control::protocol_version + 1, 3);
  const control::frame kind_99 = patched(control::heartbeat{7, 0}, control::protocol_version, 99);
  control::frame truncated = control::encode(control::goodbye{7, "a reason"}).value();
  truncated.resize(truncated.size() - 3);
  intruder.send(zmq::buffer(garbage), zmq::send_flags::none);
  send(version_2);
  send(kind_99);
  send(truncated);
  std::array<zmq::const_buffer, 2> two = {zmq::str_buffer("one"), zmq::str_buffer("two")};
  zmq::send_multipart(intruder, two);                       // two frames in one message
  send(control::encode(control::heartbeat{7, 0}).value());  // valid, but it never said hello

  const auto logged = [&](const std::string& what) {
    return eventually([&] { return h.err().find(what) != std::string::npos; });
  };
  const std::string refused = "tandem controller: refused a frame from peer 'w3' (";
  BOOST_TEST(logged(refused + std::to_string(garbage.size()) + " bytes): bad_magic: "), h.output());
  BOOST_TEST(logged(refused + std::to_string(version_2.size()) + " bytes): version_mismatch: "), h.output());
  BOOST_TEST(logged(refused + std::to_string(kind_99.size()) + " bytes): unknown_kind: "), h.output());
  BOOST_TEST(logged(refused + std::to_string(truncated.size()) + " bytes): truncated: "), h.output());
  BOOST_TEST(logged(refused + "6 bytes): framing: expected one message frame after the routing id, got 2"), h.output());
  BOOST_TEST(logged("tandem controller: ignored a heartbeat from peer 'w3', which has not joined"), h.output());

  // Hellos that do not fit the run are answered with an error naming the reason.
  control::hello hello;
  hello.rank = 9;
  hello.world_size = 4;
  hello.pid = 4242;
  hello.hostname = "elsewhere";
  const control::frame f = control::encode(hello).value();
  intruder.send(zmq::buffer(f.data(), f.size()), zmq::send_flags::none);
  const auto answer = receive(intruder);
  BOOST_TEST_REQUIRE(answer.has_value(), h.output());
  const auto* error = std::get_if<control::error>(&*answer);
  BOOST_TEST_REQUIRE(error != nullptr, "expected an error, got " << control::to_string(control::kind_of(*answer)));
  BOOST_TEST(error->text == "rank 9 is outside this run's ranks 0..3");
  BOOST_TEST(logged("tandem controller: refused the hello of peer 'w3' (pid 4242 on elsewhere): rank 9 is outside"), h.output());

  // The real rank 3 joins once the test let go of its routing id; the run goes on and ends cleanly.
  intruder.close();
  child_process w({tandem_binary, "join"},
                  {{"TANDEM_CONTROLLER", *endpoint}, {"TANDEM_RANK", "3"}, {"TANDEM_WORLD", "4"}, keys.variable()});
  BOOST_TEST(h.exit_code() == 0, h.output());
  BOOST_TEST(w.exit_code() == 0, w.output());
  BOOST_TEST(h.out().ends_with("\nok\n"), h.output());
}

BOOST_AUTO_TEST_SUITE_END()
