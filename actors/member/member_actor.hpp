// The member actor: the member's side of the control plane for the process layer (state machine
// in member.hpp). It owns the bridge (linked), says hello, waits for the welcome on CAF's clock,
// sends a heartbeat every interval, watches the controller's heartbeats, and answers shutdown with
// goodbye. It reports how it ended to its listener once: (mbr_done, exit code, message).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/atom.hpp>

#include "actors/bridge/socket_thread.hpp"
#include "actors/runtime/run_keys.hpp"

namespace tandem {

/// (mbr_done, int32 exit code, message): how the member ended (0: shut down by the controller).
using mbr_done_atom = caf::atom_constant<caf::atom("mbr_done")>;

struct member_settings {
  std::string controller;  ///< the address, for messages
  std::int64_t rank = 0;
  std::int64_t world = 0;
  std::string hostname;
  std::chrono::milliseconds welcome_timeout{60000};
  std::string log_name;  ///< "tandem member 3"
  /// Not started yet: the actor starts it with its bridge's events.
  std::shared_ptr<socket_thread> socket;
  caf::actor listener;  ///< receives mbr_done
  std::optional<run_keys> keys;  ///< this member's credentials; absent: an insecure run
};

/// Spawns the member actor, which connects and says hello.
caf::actor spawn_member_actor(caf::actor_system& sys, member_settings settings);

}  // namespace tandem
