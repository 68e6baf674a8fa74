// The one thread that owns a process's ZeroMQ control socket (DESIGN.md section 1): the
// controller's ROUTER or a member's DEALER. Nothing else in the process touches the socket.
//
//   incoming: socket --recv--> decode (codec.hpp) --ok--> events.on_message(peer, message)
//                                                 \-refused--> one stderr line naming the peer and
//                                                              the codec error; the frame is dropped
//   outgoing: post(peer, frame) from any thread --> mutex-guarded queue + eventfd write
//             --> the thread wakes in zmq_poll (socket and eventfd in one poll set) --> send
//
// Why a queue and an eventfd rather than an inproc PAIR socket: the bridge actor that posts
// frames runs on whichever CAF scheduler thread picks it up, and ZeroMQ sockets are not thread
// safe, so an inproc socket on the actor's side would be a second socket owned by no thread. With
// the queue every ZeroMQ socket stays on this thread, posting never blocks on ZeroMQ, and the
// poll sleeps until there is work (no busy loop, no timer).
//
// Socket options: ZMQ_LINGER 0 (closing never waits for a dead peer), ZMQ_MAXMSGSIZE the codec's
// frame limit (ZeroMQ drops the connection of a peer that sends more), ZMQ_ROUTER_MANDATORY on the
// ROUTER (a frame for a peer that is not connected fails at once instead of vanishing),
// ZMQ_HANDSHAKE_IVL 10 s. With security (control_security) the ROUTER is a CURVE server behind a
// ZAP handler and the DEALER a CURVE client; either way a connection guard (gpu/comm/
// connection_guard.h) logs every refused connection with its reason and caps how many are open. Sends never
// block: a peer whose queue is full, or that is not connected, is reported through
// events.on_unreachable and the frame is dropped (heartbeats and timeouts decide who is dead).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include <caf/expected.hpp>

#include "gpu/comm/curve_keys.h"
#include "orchestration/control/codec.hpp"
#include "orchestration/control/messages.hpp"

namespace tandem {

/// Which end of the control plane a socket thread serves.
enum class socket_role {
  controller_router,  ///< binds a ROUTER; peers are the members' routing ids ("w3")
  member_dealer,      ///< connects a DEALER to the controller; the only peer is "" (the controller)
};

/// CurveZMQ on a control socket: the ROUTER is a CURVE server that admits exactly the members'
/// keys (ZAP domain "tandem-control"; member r's messages carry User-Id "w<r>", and a frame whose
/// routing id is not its sender's proven id is refused); the DEALER is a CURVE client that only
/// completes a handshake with the controller's key.
struct control_security {
  gpu::curve_keypair own;
  std::string controller_public_key;            ///< dealer: the server it dials
  std::vector<std::string> member_public_keys;  ///< router: by rank
};

struct socket_options {
  socket_role role = socket_role::controller_router;
  /// Router: the bind address ("tcp://127.0.0.1:29650"; "tcp://127.0.0.1:*" for an ephemeral
  /// port). Dealer: the controller's address.
  std::string endpoint;
  /// Dealer only: this member's routing id, "w<rank>".
  std::string routing_id;
  /// Prefix of every logged line ("tandem controller", "tandem member 3").
  std::string log_name = "tandem";
  /// Larger frames are refused by ZeroMQ (ZMQ_MAXMSGSIZE) and by the decoder.
  std::size_t max_frame_bytes = control::max_frame_bytes;
  /// Refused frames logged per peer; later ones are counted only (one line says so).
  int logged_refusals_per_peer = 20;
  /// Absent: no authentication, no encryption (cluster.secure: false, loopback only).
  std::optional<control_security> security;
  /// Router: the members of the run (connections beyond it plus 16 waiting are refused).
  int expected_peers = 0;
};

/// What the socket thread reports. Called on the socket thread: keep them short (an anon_send).
struct socket_events {
  /// A frame from `peer` decoded into `m`.
  std::function<void(const std::string& peer, control::message m)> on_message;
  /// A frame for `peer` could not be handed to ZeroMQ (not connected, queue full); it is dropped.
  std::function<void(const std::string& peer, const std::string& reason)> on_unreachable;
};

/// A routing id as a reader can see it: printable ids as they are ("w3"), others in hex
/// ("0x0080000001", ZeroMQ's generated ids).
std::string peer_text(const std::string& routing_id);

/// The thread owning one control socket. Create, start(), post() from anywhere, stop().
class socket_thread {
 public:
  explicit socket_thread(socket_options options);
  /// Stops the thread (no flush) if still running.
  ~socket_thread();
  socket_thread(const socket_thread&) = delete;
  socket_thread& operator=(const socket_thread&) = delete;

  /// Starts the thread, which creates the socket and binds (router) or connects (dealer) it;
  /// returns once that is done: the socket's endpoint (a router's resolved address,
  /// "tcp://127.0.0.1:41234"; a dealer's controller address), or why the socket could not be
  /// opened (the thread has ended then). Call once.
  caf::expected<std::string> start(socket_events events);

  /// Queues `f` for `peer` (router: a routing id; dealer: ignored). Thread safe, never blocks.
  /// False once stopping (the frame is dropped).
  bool post(std::string peer, control::frame f);

  /// Sends what is queued, closes the socket giving those last frames up to `flush` to leave
  /// (ZMQ_LINGER is raised from 0 to `flush` for the close only: a member's goodbye), and joins
  /// the thread. Idempotent; no event is called after it returns.
  void stop(std::chrono::milliseconds flush = std::chrono::milliseconds(0));

  /// Frames refused so far (malformed, unknown kind, other protocol version, wrong framing).
  std::size_t refused() const { return refused_.load(); }

  /// Control traffic so far: frame bytes handed to ZeroMQ and accepted from it, heartbeats
  /// counted apart (they grow with time, not with work).
  struct traffic_counts {
    std::uint64_t sent_bytes = 0, received_bytes = 0;  ///< every kind but heartbeat
    std::uint64_t heartbeat_bytes = 0;                  ///< both ways
  };
  traffic_counts traffic() const {
    return {sent_bytes_.load(), received_bytes_.load(), heartbeat_bytes_.load()};
  }

 private:
  struct outgoing {
    std::string peer;
    control::frame bytes;
  };
  void run(std::promise<std::string>& opened);
  void wake();

  socket_options options_;
  socket_events events_;
  int wake_fd_ = -1;  // eventfd: post() and stop() wake the poll
  std::thread thread_;
  std::mutex mutex_;  // guards queue_, started_, stopping_, flush_
  std::deque<outgoing> queue_;
  bool started_ = false;
  bool stopping_ = false;
  std::chrono::milliseconds flush_{0};
  std::atomic<std::size_t> refused_{0};
  std::atomic<std::uint64_t> sent_bytes_{0}, received_bytes_{0}, heartbeat_bytes_{0};
  /// Adds a frame's size to the counter its kind belongs to.
  void count(const control::frame& f, std::size_t size, std::atomic<std::uint64_t>& work);
};

}  // namespace tandem
