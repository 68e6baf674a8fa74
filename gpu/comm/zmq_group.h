// The CPU data plane: a communicator over direct member-to-member ZeroMQ connections. The
// controller only hands out endpoints; weight buckets and gradients travel rank to rank.
//
// Joining (every rank):
//   1. own = bind_data_endpoint("10.0.0.5", options)   // a ROUTER on tcp://10.0.0.5:<ephemeral>
//   2. publish own.address() through the controller, learn every rank's address (and, when
//      secure, every rank's public key: the run's key list)
//   3. group = zmq_group::create(rank, size, addresses, std::move(own), public_keys)
//      connects one DEALER to every peer, then says hello to all and waits (up to
//      options.timeout) for every peer's hello: a rank that never joins is named in the error.
//
// Sockets: each rank receives on its one ROUTER (the bound endpoint) and sends on one DEALER per
// peer. All sockets have linger 0 (bye messages get a short linger, see ~zmq_group); the ROUTER
// refuses messages over the header plus max(chunk_bytes, 4096) bytes (ZeroMQ drops such a
// connection; a peer that sent one then times out); both ends of a link hold at most
// queue_messages messages (high-water marks), so a sender to a slow peer blocks (up to the
// timeout) instead of queueing without bound. The ROUTER never sends; it is ROUTER_MANDATORY
// all the same.
//
// Security (options.curve): off, anyone who can reach a data port can talk to it, and a rank is
// known by the routing id its DEALER claims ("r<rank>"; ZeroMQ never delivers from a second
// connection claiming an id in use, so a stranger can take a rank's place only before that rank
// connects). On, every link is CurveZMQ (RFC 26:
// authenticated, encrypted), over tcp:// or ipc:// only (inproc:// skips the handshake):
//   - the endpoint has a ZeroMQ context of its own, whose ZAP handler (zap_handler.h) starts
//     before the ROUTER binds and lets exactly options.curve->accepted_public_keys (the run's
//     processes) complete a handshake on the ZAP domain "tandem-data-<group_tag, 16 hex
//     digits>", each with its own Z85 public key as User-Id;
//   - the ROUTER is the CURVE server (own secret key), finishes a handshake within
//     min(10 s, timeout) (ZMQ_HANDSHAKE_IVL) and admits at most 16 connections beyond the
//     accepted keys at once (connection_guard.h, which logs every refused handshake with its
//     reason through options.log); its size limit adds the 33 bytes CURVE wraps each message
//     in;
//   - the DEALER to rank r is a CURVE client of peer_public_keys[r] with this rank's key pair,
//     and sets no routing id (ZeroMQ picks one no peer can claim).
// Identity: a secure group knows a message's sender as the rank whose public key is the message's
// User-Id (proven by the handshake); the routing id is ignored. The header's sender must be that
// rank.
//
// Dropped or failing: what arrives on the ROUTER is checked before it counts.
//   insecure: a message whose routing id names no peer, with other than one frame, whose header
//             does not decode, or with another group tag may come from anyone (a port scanner,
//             another run): it is dropped, counted (dropped_messages()) and logged (log_name:
//             one line each, at most 20 per reason and group, the 20th saying later ones are
//             only counted); the collective goes on.
//   secure:   only the run's processes get this far, so the same defects fail the call naming
//             the rank, and so does a message from an accepted key that is no peer of this group
//             (one of the run's processes misbehaving).
//   both:     a header whose sender is not the sending rank, a hello out of turn, and a message
//             that decodes but is not the one the collective expects (check_expected) fail the
//             call. Peer-supplied text (abort reasons, routing ids) reaches errors and logs only
//             through printable().
//
// Collectives run around the ring r -> r+1 (mod size); data only ever arrives from the ring
// predecessor, chunk by chunk (chunk_bytes per message), each message carrying a header
// (zmq_wire.h: group tag, kind, collective sequence number, message index, sender, element
// type and count) that the receiver checks against what it expects, so a stale, early or
// mismatched message fails the call with both sides named instead of being mixed in.
//   broadcast      a pipeline root -> root+1 -> ... -> root-1; the last rank then sends an empty
//                  message back to the root, so the root returns once every rank has the data.
//   reduce_scatter the ring reduce-scatter: the partial of block k starts at rank k+1, travels
//                  the ring, each rank folding its own block k in, and rank k adds its own value
//                  last, so element i of block k is the left fold
//                      ((x[k+1] op x[k+2]) op ...) op x[k]      (ranks mod size)
//                  computed once, by rank k. bfloat16/float16 partials travel as float32 and
//                  are rounded once, by rank k; int32 sums wrap modulo 2^32.
//                  uint8 (opaque bytes) is refused, as by all_reduce: see below.
//   all_reduce     the buffer cut into size near-equal segments (segment k: elements
//                  [k*count/size, (k+1)*count/size)); reduce_scatter's order per segment, then
//                  the ring all-gather passes each finished segment on unchanged: every rank
//                  holds bitwise the bytes rank k computed for segment k. (The order differs
//                  from local_group's rank order, so results may differ from it in the last bit.)
//   all_gather     the ring all-gather: block k leaves rank k and is forwarded around the ring.
// Ring collectives move chunks as a wave (chunk c through every ring step before chunk c+1),
// so a link holds one or two chunks at a time; a broadcast root runs ahead up to the queues'
// high-water marks. Bytes are copied once out of the caller's buffer into a ZeroMQ message
// and once into the destination buffer; relays forward the received message itself (header
// rewritten in place) and reductions fold into the received payload: no other copy. Messages
// never point into the caller's memory (no zmq zero-copy of user buffers), so a call that fails
// while a dead peer's queue still holds its messages leaves nothing referencing the buffers.
//
// Bytes: uint8 elements (std::byte spans, refit buckets) travel as themselves in broadcast and
// all_gather. all_reduce and reduce_scatter over uint8 are refused before the collective starts
// (invalid_argument naming the op and the dtype; no collective number is used and the group stays
// ready, since every rank making the same call refuses it alike).
//
// Failure: a peer silent for options.timeout (while this rank waits to receive from it or to
// hand it a message) fails the call. The error follows the chain of who waits for whom (blocked
// ranks tell all peers, every timeout/4, whom they wait for) to name the rank that is silent,
// e.g. "zmq_group rank 1 of 3: all_reduce #5: no message from rank 0 within 500 ms; rank 0
// waits for rank 2; rank 2 is silent (no message for 612 ms): dead, hung, or not calling
// all_reduce #5". A failing rank tells its peers (abort), so they fail at once with its reason
// ("rank 0 gave up: ..."); a destroyed group tells its peers (bye), so a later collective fails
// at once naming it ("rank 2 left the group after collective #4"). Codes: invalid_argument when
// the ranks called differently (collective, element type, count, root, op, group size,
// chunk_bytes) or an argument is bad; io_error for timeouts, departed peers, refused messages
// and transport errors; out_of_memory.
//
// States (every call of a broken group returns the failure that broke it):
//
//   create() --hello from all--> ready --collective ok--> ready
//                                  |
//                                  +--any failure (timeout, mismatch, peer abort or bye,
//                                     bad argument, transport error)--> broken
//
// Threads: not thread-safe. One thread at a time calls a group (one thread per rank is the
// intended use); handing it to another thread needs a synchronising hand-off (join, mutex).
// The ZeroMQ context (two I/O threads, so a ring rank receives and sends on separate cores)
// belongs to the endpoint and then the group (shared with the caller when
// the caller passed one in, as inproc:// addresses require; a secure endpoint's is its own),
// and so do a secure endpoint's ZAP handler and connection guard, each with a thread that may
// call options.log while the group's thread does: the log function must be thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpu/comm/communicator.h"
#include "gpu/comm/curve_keys.h"
#include "gpu/comm/zmq_wire.h"
#include "gpu/core/status.h"

namespace zmq {
class context_t;
class socket_t;
}  // namespace zmq

namespace tandem::gpu {

namespace internal {
class zmq_links;
}
class zap_handler;
class connection_guard;

/// CurveZMQ on a data endpoint (see Security above).
struct zmq_group_curve {
  curve_keypair own;                              ///< this rank's keys: the ROUTER's server key, the DEALERs' client key
  std::vector<std::string> accepted_public_keys;  ///< Z85 client keys that may connect (the run's processes)
};

/// Settings of a group; every rank must use the same chunk_bytes (checked at hello).
struct zmq_group_options {
  std::size_t chunk_bytes = std::size_t{4} << 20;     ///< payload bytes per message (>= 1)
  std::chrono::milliseconds timeout{60'000};          ///< longest silence of an awaited peer (>= 1 ms)
  int queue_messages = 16;                            ///< ZeroMQ high-water mark per link, in messages (>= 1)
  std::uint64_t group_tag = 0;                        ///< tells groups apart: a message with another tag is refused
  std::optional<zmq_group_curve> curve;               ///< CurveZMQ (authentication and encryption); nullopt: off
  std::function<void(const std::string&)> log;        ///< one line per call, no newline; may be empty; thread-safe
  std::string log_name = "tandem data plane";         ///< prefix of every line
};

/// This rank's bound receive socket: step 1 of joining a group. Move-only.
class zmq_data_endpoint {
 public:
  zmq_data_endpoint(zmq_data_endpoint&&) noexcept;
  zmq_data_endpoint& operator=(zmq_data_endpoint&&) noexcept;
  ~zmq_data_endpoint();

  /// Where peers connect: "tcp://127.0.0.1:41235", "ipc:///tmp/x.sock", "inproc://rank0".
  const std::string& address() const { return address_; }
  const zmq_group_options& options() const { return options_; }
  /// True when options().curve is set: the links are CurveZMQ.
  bool secure() const { return options_.curve.has_value(); }

 private:
  friend class zmq_group;
  friend class internal::zmq_links;
  friend result<zmq_data_endpoint> bind_data_endpoint(const std::string&, const zmq_group_options&,
                                                      std::shared_ptr<zmq::context_t>);
  zmq_data_endpoint(std::shared_ptr<zmq::context_t> context, std::unique_ptr<zap_handler> zap,
                    std::unique_ptr<connection_guard> guard, std::unique_ptr<zmq::socket_t> socket, std::string address,
                    zmq_group_options options);
  /// Closes the socket, then stops the guard and the ZAP handler, then lets go of the context.
  void release();

  // Declared in the order they are made; released in reverse (the context terminates last).
  std::shared_ptr<zmq::context_t> context_;
  std::unique_ptr<zap_handler> zap_;         // secure only
  std::unique_ptr<connection_guard> guard_;  // secure only
  std::unique_ptr<zmq::socket_t> socket_;    // ROUTER, bound
  std::string address_;
  zmq_group_options options_;
};

/// Binds this rank's receive socket. `where` is a host ("127.0.0.1": tcp on an ephemeral port)
/// or a full address ("tcp://host:port", "tcp://host:*", "ipc:///path", "inproc://name"); a
/// wildcard host (0.0.0.0) binds but is not an address peers can connect to. `context` is
/// shared with the caller when given (required for inproc://, whose ranks must share one),
/// else the endpoint makes its own. With options.curve set, the endpoint always makes its own
/// context, starts its ZAP handler and connection guard and binds a CURVE server (see Security).
/// Fails (invalid_argument) on bad options or an address that cannot be bound, naming it; when
/// secure, also on a caller's context, an inproc:// address and a malformed or mismatched key
/// (unsupported when libzmq has no CURVE).
result<zmq_data_endpoint> bind_data_endpoint(const std::string& where, const zmq_group_options& options = {},
                                             std::shared_ptr<zmq::context_t> context = nullptr);

class zmq_group final : public communicator {
 public:
  /// Joins the group as `rank` of `size`: connects to every peer_endpoints[r] (r != rank; this
  /// rank's own entry is not used), exchanges hellos and waits for all (options.timeout). A
  /// secure endpoint needs peer_public_keys[r] for every rank (Z85; entry `rank` is this rank's
  /// own public key; every other one an accepted key of the endpoint); an insecure one takes
  /// none. Fails (invalid_argument) on missing, malformed or unexpected keys before connecting;
  /// otherwise naming the ranks that did not join, or a peer that disagrees on size or
  /// chunk_bytes.
  static result<std::unique_ptr<zmq_group>> create(int rank, int size, std::vector<std::string> peer_endpoints,
                                                   zmq_data_endpoint own, std::vector<std::string> peer_public_keys = {});
  /// Tells the peers this rank left (bye, delivered with a linger of at most 200 ms) and
  /// closes the sockets.
  ~zmq_group() override;
  zmq_group(const zmq_group&) = delete;
  zmq_group& operator=(const zmq_group&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  exec_context context() const override { return exec_context::cpu(); }
  /// ok while the group is usable; after a failed call, the failure that broke it.
  const status& health() const { return broken_; }
  /// Collectives started so far (the sequence number of the latest).
  std::uint64_t collectives() const { return seq_; }
  /// Messages dropped unread so far (insecure groups only: see Dropped or failing).
  std::uint64_t dropped_messages() const;

 protected:
  status broadcast_raw(void* data, std::int64_t count, dtype type, int root) override;
  status all_reduce_raw(void* data, std::int64_t count, dtype type, reduce_op op) override;
  status all_gather_raw(const void* in, void* out, std::int64_t count_per_rank, dtype type) override;
  status reduce_scatter_raw(const void* in, void* out, std::int64_t count_per_rank, dtype type) override;

 private:
  zmq_group(int rank, int size, std::unique_ptr<internal::zmq_links> links);
  /// Runs one collective: refuses a broken group, numbers the call, turns exceptions into a
  /// status, and on failure breaks the group and tells the peers.
  template <class Body>
  status run(zmq_wire::wire_kind kind, Body&& body);

  int rank_;
  int size_;
  std::unique_ptr<internal::zmq_links> links_;
  std::uint64_t seq_ = 0;
  status broken_;
};

}  // namespace tandem::gpu
