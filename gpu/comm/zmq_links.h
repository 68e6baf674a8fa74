// The sockets of one zmq_group rank and the loop that waits on them: the hello handshake,
// sending a data message to a peer, receiving the next checked data message from a peer, and
// the control messages (waiting notes, abort, bye) handled while either waits. Internal to
// gpu/comm/ (zmq_group.h documents the protocol); includes ZeroMQ.
//
// Every wait polls the ROUTER in slices: data messages are kept per sender in arrival order (a
// link delivers in order, so the next message from a peer is the one expected next; reading
// stops once queue_messages are kept, so back-pressure reaches the senders, except while
// joining, where hellos may queue behind a fast peer's first data); a hello marks its sender
// joined; a waiting note records whom its sender waits for; an abort or a bye ends the wait
// with an error naming the peer. While a wait lasts longer than a note interval (timeout/4),
// this rank sends its own waiting note to every peer; when a wait reaches the timeout, the
// error follows the notes to the silent rank. Before any of that a message is attributed to a
// rank (by its User-Id when secure, else by its routing id) and checked; what a stranger may
// have sent to an insecure group is dropped there, counted and logged (zmq_group.h: Dropped or
// failing). One drain reads a bounded number of messages, so a flood cannot keep a wait from
// its deadline.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "gpu/comm/zmq_group.h"
#include "gpu/comm/zmq_wire.h"

namespace tandem::gpu::internal {

using zmq_clock = std::chrono::steady_clock;

class zmq_links {
 public:
  /// `peer_public_keys`: by rank, when `own` is secure (checked by the caller); else empty.
  zmq_links(int rank, int size, zmq_data_endpoint own, std::vector<std::string> peer_public_keys);
  ~zmq_links();

  /// Connects a DEALER to every peer, says hello to all and waits for every peer's hello.
  status join(const std::vector<std::string>& endpoints);

  const zmq_group_options& options() const { return options_; }
  /// Messages dropped unread (insecure only).
  std::uint64_t dropped() const { return dropped_; }

  /// Names the collective in progress (used in notes and errors).
  void begin(zmq_wire::wire_kind kind, std::uint64_t seq);

  /// A header for a message of the current collective from this rank.
  zmq_wire::wire_header header(std::uint32_t param, dtype type, std::int64_t count, std::uint32_t index,
                               std::size_t payload_bytes) const;
  /// A new message: `h` encoded, then h.payload_bytes bytes copied from `payload` (null: left
  /// for the caller to fill).
  static zmq::message_t make_message(const zmq_wire::wire_header& h, const void* payload);
  /// Overwrites the header of `msg` (a received message about to be forwarded).
  static void write_header(zmq::message_t& msg, const zmq_wire::wire_header& h);
  /// The payload of a message made or received here.
  static std::byte* payload(zmq::message_t& msg) { return msg.data<std::byte>() + zmq_wire::header_bytes; }

  /// Hands `msg` to `peer`'s queue, waiting (up to the timeout) while the queue is full.
  status send(int peer, zmq::message_t& msg);
  /// The next data message from `from`, checked against `want` (sender and tag included).
  result<zmq::message_t> receive(int from, const zmq_wire::wire_header& want);

  /// Tells every peer the current collective failed with `reason` (best effort, no waiting).
  void send_abort(const std::string& reason);
  /// Tells every peer this rank leaves after collective `last_seq` (best effort, short linger).
  void send_bye(std::uint64_t last_seq);

 private:
  /// What this rank knows about one peer from its messages.
  struct peer {
    std::string endpoint;
    std::unique_ptr<zmq::socket_t> dealer;  // this rank -> peer
    bool joined = false;
    std::optional<zmq_clock::time_point> last_heard;
    std::optional<zmq_clock::time_point> note_time;  // its latest waiting note
    std::uint32_t waiting_for = 0;
    std::uint64_t note_seq = 0;
    std::optional<std::uint64_t> left_after;  // bye: the last collective it completed
    std::deque<std::pair<zmq_wire::wire_header, zmq::message_t>> stash;  // data, in arrival order
  };

  /// Waits until ready() (tried first, then after each slice) or the timeout (then fails with
  /// on_timeout()); `awaited` is the peer whose progress it needs (-1: none, no notes); `out`,
  /// when set, is a socket waited on for room to send; `bounded` stops reading once
  /// queue_messages data messages are kept (not while joining: hellos may queue behind data).
  template <class Ready, class Timeout>
  status wait(int awaited, zmq::socket_t* out, bool bounded, Ready&& ready, Timeout&& on_timeout);
  /// Reads what has arrived: all of it, or (bounded) until queue_messages data messages are
  /// kept.
  status drain(bool bounded);
  status on_message(std::vector<zmq::message_t>& frames);
  /// Why an insecure group drops a message (an index into drops_).
  enum class drop_reason { no_peer, frames, header, group_tag };
  /// Insecure: counts and logs (rate-limited) a dropped message described by `what`; ok.
  /// Secure: the failure "refused " + what.
  status refuse(drop_reason why, const std::string& what);
  /// The rank whose key is the User-Id of `body` (secure only); fails for any other key.
  result<std::uint32_t> authenticated_rank(const zmq::message_t& body) const;
  bool secure() const { return !keys_.empty(); }
  /// An abort or bye that ends the current collective, if one arrived.
  status peer_failure() const;
  void send_notes(std::uint32_t awaited);
  /// The chain of waiting ranks from `awaited` to the silent one, for a timeout error.
  std::string blame(std::uint32_t awaited) const;
  std::string current() const;
  std::size_t stashed() const;

  int rank_;
  int size_;
  zmq_group_options options_;
  std::vector<std::string> keys_;  // Z85 public key by rank; empty when insecure
  std::chrono::milliseconds note_interval_;
  // Destroyed in reverse: the sockets, then the guard and the ZAP handler, then the context.
  std::shared_ptr<zmq::context_t> context_;
  std::unique_ptr<zap_handler> zap_;
  std::unique_ptr<connection_guard> guard_;
  std::unique_ptr<zmq::socket_t> router_;
  std::vector<peer> peers_;
  zmq_wire::wire_kind kind_ = zmq_wire::wire_kind::hello;
  std::uint64_t seq_ = 0;
  std::optional<status> aborted_;  // the first abort a peer sent
  std::uint64_t dropped_ = 0;
  std::array<std::uint64_t, 4> drops_{};  // by drop_reason
};

}  // namespace tandem::gpu::internal
