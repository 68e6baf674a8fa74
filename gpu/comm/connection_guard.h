// The connections of one server socket (the controller's ROUTER, a member's data-plane ROUTER),
// watched through a ZeroMQ socket monitor: what ZeroMQ refuses is logged with its reason, and the
// number of connections open at once is capped, so peers that never finish a handshake cannot
// pile up.
//
//   ACCEPTED(fd)            -> the peer's address (getpeername) is kept; past the cap
//                              (expected_peers + max_waiting connections open) the new
//                              connection is shut down at once, with a logged line
//   HANDSHAKE_FAILED_*      -> the reason (a ZMTP or CURVE protocol error, a ZAP refusal, an
//                              I/O error), logged with the peer's address once ZeroMQ closes
//                              that connection (DISCONNECTED follows on the same I/O thread)
//   DISCONNECTED(fd)        -> the connection is forgotten
//
// Why a cap on connections rather than on handshakes: ZeroMQ's monitor names the connection
// (its descriptor) when it is accepted and closed, not when its handshake succeeds, so the guard
// counts every open connection and leaves room for the run's own peers (expected_peers) above
// the max_waiting strangers. A handshake that does not finish within the socket's
// ZMQ_HANDSHAKE_IVL is closed by ZeroMQ, freeing its place. Shutting down a descriptor ZeroMQ
// owns only ends that connection: ZeroMQ sees the end of the stream and closes it itself.
//
// Threads: attach() on the thread that owns the server socket, before it binds; the guard's own
// thread owns the monitor's PAIR socket. Destroy the guard before the socket's context.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "gpu/core/status.h"

namespace zmq {
class context_t;
class socket_t;
}  // namespace zmq

namespace tandem::gpu {

struct connection_guard_options {
  std::string log_name = "tandem";                      ///< prefix of every line
  std::string socket_name = "the socket";               ///< "the control socket tcp://10.0.0.1:29650"
  int expected_peers = 0;                               ///< connections the run itself opens to the socket
  int max_waiting = 16;                                 ///< more connections than that at once are refused
  /// A connecting socket (a member's DEALER): only its failed handshakes are logged, no cap.
  bool client = false;
  std::function<void(const std::string&)> log;          ///< one line, called on the guard's thread
};

class connection_guard {
 public:
  /// Starts monitoring `server` (not bound yet). Fails (io_error) when ZeroMQ refuses the monitor.
  static result<std::unique_ptr<connection_guard>> attach(zmq::context_t& context, zmq::socket_t& server,
                                                          connection_guard_options options);
  ~connection_guard();
  connection_guard(const connection_guard&) = delete;
  connection_guard& operator=(const connection_guard&) = delete;

  /// Changes the name used in later lines (the bound address is known after bind).
  void rename(std::string socket_name);

  std::size_t refused_connections() const { return refused_.load(); }  ///< shut down at the cap
  std::size_t failed_handshakes() const { return failed_.load(); }     ///< refused by ZeroMQ or ZAP

 private:
  connection_guard() = default;
  void run();

  connection_guard_options options_;
  std::unique_ptr<class monitor_socket> monitor_;
  int wake_fd_ = -1;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<std::size_t> refused_{0}, failed_{0};
  std::mutex name_mutex_;  // guards options_.socket_name (rename() and the thread)
};

}  // namespace tandem::gpu
