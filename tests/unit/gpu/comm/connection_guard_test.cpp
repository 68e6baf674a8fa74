// The connection guard: connections beyond the run's own plus max_waiting are shut down at once
// with a logged line, a failed handshake is logged with its reason and the peer's address, and
// once the strangers are gone a peer of the run connects as before.
#include <boost/test/unit_test.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "gpu/comm/connection_guard.h"

using namespace tandem::gpu;

namespace {

struct captured_log {
  std::mutex mutex;
  std::string text;
  std::function<void(const std::string&)> sink() {
    return [this](const std::string& l) {
      std::lock_guard<std::mutex> lock(mutex);
      text += l + "\n";
    };
  }
  std::string all() {
    std::lock_guard<std::mutex> lock(mutex);
    return text;
  }
};

int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  return ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 ? fd : (::close(fd), -1);
}

template <class F>
bool within(std::chrono::milliseconds limit, F&& f) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (f()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return f();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(connection_guard_test)

BOOST_AUTO_TEST_CASE(connections_past_the_cap_are_refused_and_logged_and_a_peer_connects_once_they_are_gone) {
  captured_log log;
  zmq::context_t context(1);
  zmq::socket_t server(context, zmq::socket_type::router);
  server.set(zmq::sockopt::linger, 0);
  connection_guard_options o;
  o.log_name = "test";
  o.socket_name = "the test socket";
  o.expected_peers = 1;
  o.max_waiting = 2;
  o.log = log.sink();
  auto guard = connection_guard::attach(context, server, o);
  BOOST_TEST_REQUIRE(guard.has_value(), (guard ? "" : guard.error().message()));
  server.bind("tcp://127.0.0.1:*");
  const std::string endpoint = server.get(zmq::sockopt::last_endpoint);
  const int port = std::stoi(endpoint.substr(endpoint.rfind(':') + 1));

  std::vector<int> idle;  // strangers that never say a word
  for (int i = 0; i < 6; ++i) idle.push_back(connect_to(port));
  BOOST_TEST(within(std::chrono::seconds(10), [&] { return (*guard)->refused_connections() == 3u; }), log.all());
  BOOST_TEST(log.all().find("test: refused a connection from 127.0.0.1:") != std::string::npos, log.all());
  BOOST_TEST(log.all().find("to the test socket: 3 connections are open (room for 1 of the run's peers and 2 more in the "
                            "handshake)") != std::string::npos,
             log.all());
  for (const int fd : idle) ::close(fd);

  // A stranger that speaks another mechanism fails its handshake, logged with the reason... (a
  // plain server here, so a CURVE client is the stranger).
  {
    zmq::context_t c(1);
    zmq::socket_t d(c, zmq::socket_type::dealer);
    d.set(zmq::sockopt::linger, 0);
    const std::string k(40, '0');
    d.set(zmq::sockopt::curve_serverkey, k);
    d.set(zmq::sockopt::curve_publickey, k);
    d.set(zmq::sockopt::curve_secretkey, k);
    d.connect(endpoint);
    // Which side notices first depends on timing: the server sees the mismatch, or the client's
    // close (a reset) first. Either way the refusal is logged with its reason.
    const std::size_t before = log.all().size();
    BOOST_TEST(within(std::chrono::seconds(10),
                      [&] {
                        const std::string after = log.all().substr(before);
                        return after.find("ZMTP mechanism mismatch") != std::string::npos ||
                               after.find("the handshake failed: ") != std::string::npos;
                      }),
               log.all());
  }
  // ...and a plain peer, like the run's own, gets through once the strangers are gone.
  zmq::context_t c(1);
  zmq::socket_t d(c, zmq::socket_type::dealer);
  d.set(zmq::sockopt::linger, 0);
  d.connect(endpoint);
  d.send(zmq::str_buffer("hello"), zmq::send_flags::none);
  server.set(zmq::sockopt::rcvtimeo, 10000);
  zmq::message_t id, body;
  BOOST_TEST_REQUIRE(server.recv(id).has_value());
  BOOST_TEST_REQUIRE(server.recv(body).has_value());
  BOOST_TEST(body.to_string() == "hello");
  server.close();
  guard->reset();
}

BOOST_AUTO_TEST_SUITE_END()
