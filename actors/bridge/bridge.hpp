// The bridge actor: the one place where CAF messages become control-plane frames and back
// (DESIGN.md section 1). Local actors send it (ctl_send, peer, message); it encodes the message
// (codec.hpp) and posts the frame to the process's socket thread. The socket thread decodes what
// arrives and hands it over with anon_send as (ctl_in, peer, message); the bridge forwards it to
// its listener (the controller or member actor) as (ctl_recv, peer, message).
//
//   local actor --(ctl_send, peer, m)--> bridge --encode--> socket_thread::post --> ZeroMQ
//   ZeroMQ --> socket thread --decode--> anon_send (ctl_in, peer, m) --> bridge
//          --(ctl_recv, peer, m)--> listener
//   socket thread --(ctl_unreach, peer, reason)--> bridge --(same)--> listener
//   local actor --(ctl_flush)--> bridge --true--> (its earlier ctl_sends are posted)
//
// Peers: routing ids on the controller ("w3"), "" on a member (its controller). Control messages
// stay process-local CAF values (control::message travels as an unsafe local type; CAF's own
// network layer is not used).
#pragma once

#include <memory>
#include <string>

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/atom.hpp>
#include <caf/typed_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/bridge/socket_thread.hpp"
#include "orchestration/control/messages.hpp"

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(tandem::control::message)

namespace tandem {

/// (ctl_send, peer, message): a local actor asks the bridge to send `message` to `peer`.
using ctl_send_atom = caf::atom_constant<caf::atom("ctl_send")>;
/// (ctl_in, peer, message): the socket thread hands a decoded message to the bridge.
using ctl_in_atom = caf::atom_constant<caf::atom("ctl_in")>;
/// (ctl_recv, peer, message): the bridge hands a message from `peer` to its listener.
using ctl_recv_atom = caf::atom_constant<caf::atom("ctl_recv")>;
/// (ctl_unreach, peer, reason): a frame for `peer` was dropped (not connected, queue full).
using ctl_unreach_atom = caf::atom_constant<caf::atom("ctl_unrch")>;
/// (ctl_flush) -> true: every ctl_send the requester sent before has been handed to the socket thread.
using ctl_flush_atom = caf::atom_constant<caf::atom("ctl_flush")>;

using bridge_actor = caf::typed_actor<
    /// Encode and send to `peer` (a routing id on the controller; ignored on a member).
    caf::reacts_to<ctl_send_atom, std::string, control::message>,
    /// From the socket thread: a decoded message from `peer`; forwarded to the listener.
    caf::reacts_to<ctl_in_atom, std::string, control::message>,
    /// From the socket thread: a frame for `peer` was dropped; forwarded to the listener.
    caf::reacts_to<ctl_unreach_atom, std::string, std::string>,
    /// Answers once the requester's earlier ctl_sends are posted (messages of one sender arrive in
    /// order): a member flushes its goodbye before the socket closes.
    caf::replies_to<ctl_flush_atom>::with<bool>>;

struct bridge_state {
  std::shared_ptr<socket_thread> socket;
  caf::actor listener;
  std::string log_name;
  static inline const char* name = "bridge";
};

/// Spawnable behaviour. `socket` is not started yet or already running; start it with
/// bridge_events(handle) so incoming messages reach this actor.
bridge_actor::behavior_type bridge(bridge_actor::stateful_pointer<bridge_state> self, std::shared_ptr<socket_thread> socket,
                                   caf::actor listener, std::string log_name);

/// Socket-thread events that hand every decoded message and unreachable notice to `b`.
socket_events bridge_events(const bridge_actor& b);

}  // namespace tandem
