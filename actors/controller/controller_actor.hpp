// The controller actor: the controller's side of the control plane for the process layer. It
// owns the bridge and the supervisor (both linked to it), welcomes each expected member rank,
// exchanges heartbeats with every member, and ends the run: cleanly (shutdown, every member
// left) or failed, naming the member and why.
//
//   joining --every expected rank welcomed--> running --run_for passed, or the RL loop done--> stopping
//      |                                         |                          |  every member left
//      |                                         |                          v  (local: reaped with
//      |                                         |                      finished(ok)   status 0)
//      +--- join deadline, a member lost (supervisor), a local member exited (reaper),
//           a spawn failure, a member leaving early, the stop deadline -------> finished(failed)
//
//   joining:  hello(rank r) --checks--> welcome (roles, dp/rollout ranks, run id, heartbeat
//             interval/timeout) and supervisor watch(name); a hello that fails a check is
//             answered with error and logged, and the run goes on
//   any state but finished: heartbeat in --> supervisor heartbeat(name); every interval a
//             heartbeat out to every joined member
//   running with a recipe (the RL loop): data_endpoint from every member --> peer_table to every
//             member; then the RL loop (rl_loop.hpp) drives the steps through one remote proxy per
//             policy rank and per rollout worker (remote_policy.hpp, remote_rollout.hpp); every
//             other message of a member goes to its proxy; (rl_done, ok) ends the run, ok or failed
//   finished(failed): shutdown to every member still there, then (ctl_done, false, message,
//             lost rank) to the listener; finished(ok): (ctl_done, true, summary, -1)
//
// Messages of the run function (controller.cpp) and the reaper thread:
//   listener <- (ctl_listen, endpoint)          the ROUTER is bound (or ctl_done with the reason)
//   (ctl_spawn, rank, pid)                      a local child was started for rank
//   (ctl_exit, rank, pid, wait status, how)     a local child ended ("exited with signal 9 (SIGKILL)")
//   (ctl_fail, message)                         the run function could not start a member
//   (ctl_intr, signal)                          SIGINT/SIGTERM: joining or running --> stopping
//                                               (shutdown to every member), then finished(failed,
//                                               "interrupted by SIGINT ...") once all left
// The supervisor's notice (member_lost_atom, name, reason) fails the run with that name.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/atom.hpp>

#include "actors/bridge/socket_thread.hpp"
#include "actors/controller/memory_plan_figures.hpp"
#include "actors/controller/step_line.hpp"
#include "orchestration/config/recipe.h"
#include "actors/controller/checkpoint_state.hpp"
#include "orchestration/records/run_files.h"
#include "orchestration/topology/placement.h"

namespace tandem {

using ctl_listen_atom = caf::atom_constant<caf::atom("ctl_listen")>;
using ctl_spawn_atom = caf::atom_constant<caf::atom("ctl_spawn")>;
using ctl_exit_atom = caf::atom_constant<caf::atom("ctl_exit")>;
using ctl_fail_atom = caf::atom_constant<caf::atom("ctl_fail")>;
/// (ctl_done, ok, message, lost rank or -1): the outcome, sent to the listener once.
using ctl_done_atom = caf::atom_constant<caf::atom("ctl_done")>;
/// (ctl_intr, signal number): SIGINT or SIGTERM reached the controller process: stop the members
/// in order (shutdown, wait for them to leave), then finish failed, saying so.
using ctl_interrupt_atom = caf::atom_constant<caf::atom("ctl_intr")>;

/// What the controller actor needs (controller.hpp fills it from controller_options).
struct controller_settings {
  topology::placement_plan plan;
  std::string recipe_yaml;
  std::string run_id;
  std::chrono::milliseconds heartbeat_interval{1000};
  std::chrono::milliseconds heartbeat_timeout{10000};
  std::chrono::milliseconds join_timeout{60000};
  std::chrono::milliseconds stop_timeout{10000};
  std::chrono::milliseconds run_for{0};  ///< 0: run until a failure (without a recipe)
  /// Set: run the RL loop (rl_loop.hpp) for `steps` steps (0: grpo.max_num_steps), then stop.
  std::optional<config::recipe_config> recipe;
  std::int64_t steps = 0;
  /// The run's files, for the RL loop's records (null files: not written).
  records::run_files records;
  /// Step checkpoints and the one this run resumes from (checkpoint_state.hpp).
  checkpoint_plan checkpoints;
  /// The dry run's memory plan per phase, beside the memory in use in the step records (zero: none).
  memory_plan_figures memory_plan;
  /// Not started yet: the actor starts it with its bridge's events.
  std::shared_ptr<socket_thread> socket;
  /// Receives ctl_listen and ctl_done.
  caf::actor listener;
  /// Progress lines (joins, the end); called on actor threads. May be empty.
  std::function<void(const std::string&)> report;
  /// The RL loop's step lines and generation progress (rl_loop_settings); may be empty.
  std::function<void(const step_line&)> step_lines;
  std::function<void(std::size_t done, std::size_t total)> progress;
};

/// Spawns the controller actor, which binds the socket and reports to settings.listener.
caf::actor spawn_controller(caf::actor_system& sys, controller_settings settings);

}  // namespace tandem
