// The socket thread on its own (actors/bridge/socket_thread.hpp), in this process against a raw
// DEALER: decoded messages reach on_message with the peer's routing id, refused frames are
// counted and never delivered, frames for an unknown peer are reported unreachable, posted frames
// arrive, a bad address is refused with the reason, and nothing is accepted after stop().
#include <boost/test/unit_test.hpp>

#include <mutex>
#include <span>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "actors/api/error_context.hpp"
#include "actors/bridge/socket_thread.hpp"
#include "orchestration/control/codec.hpp"
#include "process_support.hpp"
#include "support/raw_tcp_peer.h"

namespace control = tandem::control;
using runtime_test::eventually;

namespace socket_thread_test_support {

/// What the socket thread reported, read from the test thread.
struct recorder {
  std::mutex mutex;
  std::vector<std::pair<std::string, control::message>> messages;
  std::vector<std::pair<std::string, std::string>> unreachable;

  tandem::socket_events events() {
    tandem::socket_events e;
    e.on_message = [this](const std::string& peer, control::message m) {
      std::lock_guard<std::mutex> lock(mutex);
      messages.emplace_back(peer, std::move(m));
    };
    e.on_unreachable = [this](const std::string& peer, const std::string& reason) {
      std::lock_guard<std::mutex> lock(mutex);
      unreachable.emplace_back(peer, reason);
    };
    return e;
  }
  std::size_t message_count() {
    std::lock_guard<std::mutex> lock(mutex);
    return messages.size();
  }
  std::size_t unreachable_count() {
    std::lock_guard<std::mutex> lock(mutex);
    return unreachable.size();
  }
};

tandem::socket_options router_options() {
  tandem::socket_options o;
  o.role = tandem::socket_role::controller_router;
  o.endpoint = "tcp://127.0.0.1:*";
  o.log_name = "socket_thread_test";
  return o;
}

}  // namespace socket_thread_test_support

using namespace socket_thread_test_support;

BOOST_AUTO_TEST_SUITE(socket_thread_test)

BOOST_AUTO_TEST_CASE(a_router_delivers_decoded_messages_refuses_bad_frames_and_reports_unknown_peers) {
  recorder r;
  tandem::socket_thread t(router_options());
  const auto endpoint = t.start(r.events());
  BOOST_TEST_REQUIRE(static_cast<bool>(endpoint), (endpoint ? std::string() : tandem::error_text(endpoint.error())));
  BOOST_TEST(endpoint->starts_with("tcp://127.0.0.1:"));

  zmq::context_t context(1);
  zmq::socket_t dealer(context, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  dealer.set(zmq::sockopt::routing_id, "w5");
  dealer.connect(*endpoint);
  const control::frame hb = control::encode(control::heartbeat{5, 41}).value();
  dealer.send(zmq::str_buffer("garbage"), zmq::send_flags::none);
  dealer.send(zmq::buffer(hb.data(), hb.size()), zmq::send_flags::none);
  BOOST_TEST_REQUIRE(eventually([&] { return r.message_count() == 1 && t.refused() == 1; }));
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    BOOST_TEST(r.messages[0].first == "w5");
    BOOST_TEST((r.messages[0].second == control::message(control::heartbeat{5, 41})));
  }

  // Posted frames reach the peer; frames for a peer that is not connected are reported.
  const control::frame bye = control::encode(control::shutdown{"done"}).value();
  BOOST_TEST(t.post("w5", bye));
  BOOST_TEST(t.post("nobody", bye));
  zmq::message_t got;
  BOOST_TEST_REQUIRE(eventually([&] { return dealer.recv(got, zmq::recv_flags::dontwait).has_value(); }));
  BOOST_TEST(std::string(got.data<char>(), got.size()) == std::string(reinterpret_cast<const char*>(bye.data()), bye.size()));
  BOOST_TEST_REQUIRE(eventually([&] { return r.unreachable_count() == 1; }));
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    BOOST_TEST(r.unreachable[0].first == "nobody");
    BOOST_TEST(r.unreachable[0].second == "no connected peer has this routing id");
  }

  t.stop();
  BOOST_TEST(!t.post("w5", bye));
  BOOST_TEST(r.message_count() == 1u);
}

BOOST_AUTO_TEST_CASE(a_router_without_curve_closes_a_zmtp_1_0_peer_at_its_greeting) {
  // libzmq 4.3.4 aborts the process when such a peer's routing id meets a closing socket
  // (gpu/comm/zmtp_versions.h): no such peer may get past its greeting.
  recorder r;
  tandem::socket_thread t(router_options());
  const auto endpoint = t.start(r.events());
  BOOST_TEST_REQUIRE(static_cast<bool>(endpoint), (endpoint ? std::string() : tandem::error_text(endpoint.error())));
  const int port = std::stoi(endpoint->substr(endpoint->rfind(':') + 1));
  BOOST_TEST(tandem::test::zmtp1_peer_is_closed(port, std::chrono::seconds(4)));
  // A ZMTP 3 peer without CURVE still gets through (no ZAP handler enforces the domain).
  zmq::context_t context(1);
  zmq::socket_t dealer(context, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::linger, 0);
  dealer.set(zmq::sockopt::routing_id, "w2");
  dealer.connect(*endpoint);
  const control::frame hb = control::encode(control::heartbeat{2, 7}).value();
  dealer.send(zmq::buffer(hb.data(), hb.size()), zmq::send_flags::none);
  BOOST_TEST(eventually([&] { return r.message_count() == 1; }));
  t.stop();
}

BOOST_AUTO_TEST_CASE(an_address_that_cannot_be_bound_is_refused_with_the_reason) {
  auto o = router_options();
  o.endpoint = "tcp://not-an-interface:1";
  tandem::socket_thread t(o);
  const auto endpoint = t.start({});
  BOOST_TEST_REQUIRE(!endpoint);
  BOOST_TEST(tandem::error_text(endpoint.error())
                 .starts_with("cannot bind the controller's ROUTER socket to 'tcp://not-an-interface:1': "),
             tandem::error_text(endpoint.error()));
  BOOST_TEST(!t.post("w0", control::frame{}));
}

BOOST_AUTO_TEST_CASE(routing_ids_are_shown_as_text_when_printable_and_in_hex_otherwise) {
  BOOST_TEST(tandem::peer_text("w3") == "w3");
  BOOST_TEST(tandem::peer_text(std::string("\0\x80\x01", 3)) == "0x008001");
  BOOST_TEST(tandem::peer_text("") == "<empty id>");
}

BOOST_AUTO_TEST_SUITE_END()
