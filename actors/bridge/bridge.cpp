// The bridge actor: encode outgoing control messages, forward incoming ones.
#include "actors/bridge/bridge.hpp"

#include <caf/all.hpp>

#include "actors/bridge/log_line.hpp"
#include "orchestration/control/codec.hpp"

namespace tandem {

bridge_actor::behavior_type bridge(bridge_actor::stateful_pointer<bridge_state> self, std::shared_ptr<socket_thread> socket,
                                   caf::actor listener, std::string log_name) {
  self->state.socket = std::move(socket);
  self->state.listener = std::move(listener);
  self->state.log_name = std::move(log_name);
  return {
      [=](ctl_send_atom, const std::string& peer, const control::message& m) {
        auto encoded = control::encode(m);
        if (!encoded) {
          log_line(self->state.log_name + ": cannot send " + std::string(control::to_string(control::kind_of(m))) + " to peer '" +
                   peer_text(peer) + "': " + encoded.error().text);
          return;
        }
        self->state.socket->post(peer, std::move(encoded).value());  // false only while stopping
      },
      [=](ctl_in_atom, const std::string& peer, const control::message& m) {
        // The listener is dynamically typed (controller, member): CAF checks nothing here.
        caf::unsafe_send_as(self, self->state.listener, ctl_recv_atom::value, peer, m);
      },
      [=](ctl_unreach_atom, const std::string& peer, const std::string& reason) {
        caf::unsafe_send_as(self, self->state.listener, ctl_unreach_atom::value, peer, reason);
      },
      [=](ctl_flush_atom) { return true; },
  };
}

socket_events bridge_events(const bridge_actor& b) {
  socket_events e;
  e.on_message = [b](const std::string& peer, control::message m) { caf::anon_send(b, ctl_in_atom::value, peer, std::move(m)); };
  e.on_unreachable = [b](const std::string& peer, const std::string& reason) {
    caf::anon_send(b, ctl_unreach_atom::value, peer, reason);
  };
  return e;
}

}  // namespace tandem
