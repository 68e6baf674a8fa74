// The worker actor: the worker's side of the control plane for the process layer (state machine
// in worker.hpp). It owns the bridge (linked), says hello, waits for the welcome on CAF's clock,
// sends a heartbeat every interval, watches the controller's heartbeats, and answers shutdown with
// goodbye. It reports how it ended to its listener once: (wrk_done, exit code, message).
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

/// (wrk_done, int32 exit code, message): how the worker ended (0: shut down by the controller).
using wrk_done_atom = caf::atom_constant<caf::atom("wrk_done")>;

struct worker_settings {
  std::string controller;  ///< the address, for messages
  std::int64_t rank = 0;
  std::int64_t world = 0;
  std::string hostname;
  std::chrono::milliseconds welcome_timeout{60000};
  std::string log_name;  ///< "tandem worker 3"
  /// Not started yet: the actor starts it with its bridge's events.
  std::shared_ptr<socket_thread> socket;
  caf::actor listener;  ///< receives wrk_done
  std::optional<run_keys> keys;  ///< this worker's credentials; absent: an insecure run
};

/// Spawns the worker actor, which connects and says hello.
caf::actor spawn_worker_actor(caf::actor_system& sys, worker_settings settings);

}  // namespace tandem
