// The supervisor: watches every member's heartbeats and names the one that stops answering.
//
//   watch(name) ---> watching(name): last heartbeat = now
//   heartbeat(name) ---> last heartbeat = now
//   tick (every check_interval, on CAF's clock) ---> for each watched member whose last heartbeat
//       is older than heartbeat_timeout: mark it lost, tell the listener (member_lost, name,
//       reason), stop watching it
//   forget(name) ---> stop watching (a member that said goodbye)
//
// A dead member (its process killed) and a hung one (SIGSTOP, a deadlock) look the same here:
// heartbeats stop. The listener (the controller's driver) fails the running step with the name.
// All times come from the actor's clock, so tests advance virtual time.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include <caf/actor_clock.hpp>
#include <caf/atom.hpp>
#include <caf/typed_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/api/type_ids.hpp"

namespace tandem {

using watch_atom = caf::atom_constant<caf::atom("watch")>;
using heartbeat_atom = caf::atom_constant<caf::atom("heartbeat")>;
using forget_atom = caf::atom_constant<caf::atom("forget")>;
using tick_atom = caf::atom_constant<caf::atom("tick")>;
/// (lost_atom, name, reason): the notice the driver handles (actors/api/type_ids.hpp).
using lost_atom = member_lost_atom;
using watched_atom = caf::atom_constant<caf::atom("watched")>;

/// A member the supervisor declared lost, as the listener receives it.
/// Message to the listener: (lost_atom, member name, reason text).
using supervisor_actor = caf::typed_actor<
    /// Start watching `name`; its heartbeat clock starts now.
    caf::reacts_to<watch_atom, std::string>,
    /// `name` is alive now.
    caf::reacts_to<heartbeat_atom, std::string>,
    /// Stop watching `name` (it left in an orderly way).
    caf::reacts_to<forget_atom, std::string>,
    /// Periodic check; sent by the supervisor to itself.
    caf::reacts_to<tick_atom>,
    /// Names currently watched, sorted.
    caf::replies_to<watched_atom>::with<std::vector<std::string>>>;

/// When each watched member was last heard from.
struct supervisor_state {
  std::map<std::string, caf::actor_clock::time_point> last_seen;
  static inline const char* name = "supervisor";
};

struct supervisor_options {
  std::chrono::milliseconds heartbeat_timeout{10000};
  std::chrono::milliseconds check_interval{1000};
};

/// Spawnable behaviour; `listener` receives (lost_atom, name, reason) for every lost member.
supervisor_actor::behavior_type supervisor(supervisor_actor::stateful_pointer<supervisor_state> self,
                                           caf::actor listener, supervisor_options options);

}  // namespace tandem
