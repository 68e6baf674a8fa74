// A member process's runtime as one library call (`tandem join`): connect to the controller,
// say hello, wait for the welcome, exchange heartbeats, and leave on shutdown. The member treats
// a controller that stops sending heartbeats as dead and exits; spawned by a local controller it
// also dies with it at once (PR_SET_PDEATHSIG).
//
//   connecting --welcome--> joined --shutdown--> goodbye, exit 0
//      |  \--error from the controller (hello refused)--> exit 1, its text
//      +--no welcome within welcome_timeout--> exit 1
//   joined: a heartbeat every interval; no controller heartbeat for the timeout --> exit 1
//
// With the run's keys (member_options::keys) every connection is CurveZMQ: to the controller
// (whose key it must prove) and on the data plane; without them the member dials only a
// controller on loopback (cluster.secure: false).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "actors/runtime/run_keys.hpp"

namespace tandem {

struct member_options {
  std::string controller;  ///< the controller's ROUTER: "tcp://10.0.0.1:29650"
  std::int64_t rank = 0;   ///< 0 .. world-1
  std::int64_t world = 0;  ///< members in the run
  /// Members on this node, for the thread caps (scheduler_threads, BLAS). 0: world.
  std::int64_t local_members = 0;
  /// Pid of the controller that spawned this process; 0 when a launcher started it. Set: the
  /// member asks for SIGTERM when its parent dies (PR_SET_PDEATHSIG) and exits at once if that
  /// parent is already gone.
  std::int64_t parent_pid = 0;
  std::chrono::milliseconds welcome_timeout{60000};
  /// False: the caller already capped the BLAS threads (or wants them as they are).
  bool cap_threads = true;
  /// This member's credentials (its own secret key, every public key): CurveZMQ to the controller
  /// and on the data plane. Absent: no security, allowed only with a controller on loopback.
  std::optional<run_keys> keys;
};

/// How the member ended: exit_code 0 after the shutdown of a run that ended, 1 after the shutdown
/// of a run that failed or a failure of its own (no welcome, refused, controller silent, parent
/// gone), 2 for unusable options. `message` says why.
struct member_result {
  int exit_code = 1;
  std::string message;
  bool shut_down = false;  ///< the controller shut the member down (a goodbye is on its way)
};

/// Runs the member until shutdown or failure; blocks. Never throws; prints progress to stderr
/// ("tandem member 1: joined run ... as rollout-0").
member_result run_member(const member_options& options);

}  // namespace tandem
