// The ZAP handler of one ZeroMQ context (ZeroMQ RFC 27): the thread that decides which CURVE
// clients may complete a handshake with the server sockets of the context. Without a handler a
// CURVE server accepts every client key, so the handler starts before any server socket binds and
// lives until they are closed.
//
//   ZeroMQ's I/O thread --ZAP request (domain, address, mechanism, client key)--> REP socket
//     on inproc://zeromq.zap.01 --allowed (domain, key)?--> "200", User-Id = the key's user id
//                                \--otherwise--> "400", one log line (per address, rate-limited)
//
// Each server socket names its ZAP domain (ZMQ_ZAP_DOMAIN); a key is allowed per domain, with
// the user id its messages then carry ("User-Id" message property): the receiver identifies a
// peer by that id, proven by the handshake, never by a routing id the peer chose. Only CURVE is
// accepted: a request for any other mechanism is refused.
//
// Threads: allow() and the counters may be called from any thread; the handler's thread owns
// the REP socket.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "gpu/core/status.h"

namespace zmq {
class context_t;
}

namespace tandem::gpu {

class zap_handler {
 public:
  /// One log line (without newline); called on the handler's thread.
  using log_fn = std::function<void(const std::string&)>;

  /// Binds inproc://zeromq.zap.01 on `context` and starts serving it. `log_name` prefixes every
  /// line ("tandem controller"). Fails (invalid_argument) when the context has a handler already.
  static result<std::unique_ptr<zap_handler>> start(zmq::context_t& context, std::string log_name, log_fn log);
  /// Stops the thread and closes the socket (handshakes in flight are then refused by ZeroMQ).
  ~zap_handler();
  zap_handler(const zap_handler&) = delete;
  zap_handler& operator=(const zap_handler&) = delete;

  /// Lets the client key `public_z85` complete handshakes on `domain`; its messages carry
  /// `user_id`. Allowing a key again replaces its user id.
  void allow(const std::string& domain, const std::string& public_z85, const std::string& user_id);

  std::size_t accepted() const { return accepted_.load(); }
  std::size_t refused() const { return refused_.load(); }

 private:
  zap_handler() = default;
  void run();

  std::string log_name_;
  log_fn log_;
  std::unique_ptr<class zap_socket> socket_;
  int wake_fd_ = -1;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::mutex mutex_;                                                   // guards allowed_
  std::map<std::pair<std::string, std::string>, std::string> allowed_;  // (domain, key bytes) -> user id
  std::map<std::string, int> refusals_by_address_;                      // thread-owned
  std::atomic<std::size_t> accepted_{0}, refused_{0};
};

}  // namespace tandem::gpu
