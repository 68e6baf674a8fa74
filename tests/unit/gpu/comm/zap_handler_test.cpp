// The ZAP handler: a CURVE server socket of its context completes a handshake only with a key
// allowed on its domain, whose messages then carry the key's user id; anything else is refused
// with a logged line naming the address and the key's fingerprint.
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "gpu/comm/curve_keys.h"
#include "gpu/comm/zap_handler.h"

using namespace tandem::gpu;

namespace {

struct captured_log {
  std::mutex mutex;
  std::vector<std::string> lines;
  std::function<void(const std::string&)> sink() {
    return [this](const std::string& l) {
      std::lock_guard<std::mutex> lock(mutex);
      lines.push_back(l);
    };
  }
  std::string all() {
    std::lock_guard<std::mutex> lock(mutex);
    std::string out;
    for (const auto& l : lines) out += l + "\n";
    return out;
  }
};

/// A CURVE client of `server` with `client` keys sends "hi"; the server's first message within
/// 2 s, or nothing.
std::optional<std::string> user_of_message(zmq::socket_t& server, const std::string& endpoint, const std::string& server_public,
                                           const curve_keypair& client) {
  zmq::context_t c(1);
  zmq::socket_t d(c, zmq::socket_type::dealer);
  d.set(zmq::sockopt::linger, 0);
  d.set(zmq::sockopt::curve_serverkey, server_public);
  d.set(zmq::sockopt::curve_publickey, client.public_key);
  d.set(zmq::sockopt::curve_secretkey, client.secret_key);
  d.connect(endpoint);
  d.send(zmq::str_buffer("hi"), zmq::send_flags::none);
  server.set(zmq::sockopt::rcvtimeo, 2000);
  zmq::message_t id, body;
  if (!server.recv(id) || !server.recv(body)) return std::nullopt;
  return std::string(body.gets("User-Id"));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(zap_handler_test)

BOOST_AUTO_TEST_CASE(only_a_key_allowed_on_the_sockets_domain_gets_through_and_its_messages_carry_its_user_id) {
  captured_log log;
  zmq::context_t context(1);
  auto zap = zap_handler::start(context, "test", log.sink());
  BOOST_TEST_REQUIRE(zap.has_value(), (zap ? "" : zap.error().message()));
  const curve_keypair server_keys = make_curve_keypair().value(), alice = make_curve_keypair().value(),
                      mallory = make_curve_keypair().value(), elsewhere = make_curve_keypair().value();
  (*zap)->allow("tandem-test", alice.public_key, "w1");
  (*zap)->allow("another-domain", elsewhere.public_key, "w2");
  zmq::socket_t server(context, zmq::socket_type::router);
  server.set(zmq::sockopt::linger, 0);
  server.set(zmq::sockopt::curve_server, 1);
  server.set(zmq::sockopt::curve_secretkey, server_keys.secret_key);
  server.set(zmq::sockopt::zap_domain, "tandem-test");
  server.bind("tcp://127.0.0.1:*");
  const std::string endpoint = server.get(zmq::sockopt::last_endpoint);

  BOOST_TEST(user_of_message(server, endpoint, server_keys.public_key, alice).value_or("nothing") == "w1");
  BOOST_TEST(!user_of_message(server, endpoint, server_keys.public_key, mallory).has_value());
  BOOST_TEST(!user_of_message(server, endpoint, server_keys.public_key, elsewhere).has_value());  // allowed on another domain only
  BOOST_TEST((*zap)->accepted() == 1u);
  BOOST_TEST((*zap)->refused() >= 2u);
  const std::string lines = log.all();
  BOOST_TEST(lines.find("test: refused a handshake from 127.0.0.1 on tandem-test: client key " +
                        key_fingerprint(mallory.public_key) + "... is not one of this run's") != std::string::npos,
             lines);
  server.close();
  zap->reset();
}

BOOST_AUTO_TEST_CASE(a_second_handler_on_one_context_is_refused_and_keys_round_trip_through_z85) {
  zmq::context_t context(1);
  auto first = zap_handler::start(context, "one", {});
  BOOST_TEST_REQUIRE(first.has_value());
  auto second = zap_handler::start(context, "two", {});
  BOOST_TEST_REQUIRE(!second.has_value());
  BOOST_TEST(second.error().message().find("two: cannot start the ZAP handler") == 0u, second.error().message());
  const curve_keypair k = make_curve_keypair().value();
  BOOST_TEST(is_curve_key(k.public_key));
  BOOST_TEST(curve_public_key(k.secret_key).value() == k.public_key);
  BOOST_TEST(curve_key_text(curve_key_bytes(k.public_key)) == k.public_key);
  BOOST_TEST(!is_curve_key("short"));
  BOOST_TEST(!curve_public_key(std::string(40, '"')).has_value());
}

BOOST_AUTO_TEST_SUITE_END()
