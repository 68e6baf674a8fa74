// The controller process's runtime as one library call: bind the control socket, start the local
// members (fork/exec of `tandem join --controller ADDR --rank R --world W`, each with its keys on
// an inherited descriptor), welcome every rank
// of the placement plan, exchange heartbeats, and end the run cleanly or name the member that
// failed it. `tandem run` (a later issue) and tests/integration/runtime/controller_harness.cpp
// call it.
//
// A run fails, naming the member (its rank, actors, pid and host) and why, when: a member misses
// heartbeats past the timeout (dead or hung); a local member process exits before the end
// (waitpid: "member 1 [rollout-0] (pid 1234) exited with signal 9 (SIGKILL)"), whichever of the two
// comes first; a member does not say hello within the join timeout; a member leaves early; or the
// members do not leave within the stop timeout. No child outlives the call: after a failure the
// lost member is killed at once, the others get kill_grace to leave, then SIGKILL, and all are
// reaped.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "actors/controller/memory_plan_figures.hpp"
#include "actors/controller/step_line.hpp"
#include "actors/runtime/run_keys.hpp"
#include "orchestration/config/recipe.h"
#include "orchestration/control/codec.hpp"
#include "actors/controller/checkpoint_state.hpp"
#include "orchestration/records/run_files.h"
#include "orchestration/topology/placement.h"

namespace tandem {

struct controller_options {
  topology::placement_plan plan;  ///< every member rank of the run
  std::string recipe_yaml;        ///< the resolved recipe, sent in every welcome
  std::string run_id;             ///< empty: "run-<pid>"
  /// The ROUTER's bind address; empty: plan.control_endpoint. "tcp://127.0.0.1:*": an ephemeral
  /// port (tests).
  std::string bind_endpoint;
  std::chrono::milliseconds heartbeat_interval{1000};  ///< both ways
  std::chrono::milliseconds heartbeat_timeout{10000};  ///< silence longer than this: dead or hung
  std::chrono::milliseconds join_timeout{60000};       ///< every rank says hello within this
  std::chrono::milliseconds stop_timeout{10000};       ///< every member leaves within this of the shutdown
  std::chrono::milliseconds kill_grace{2000};          ///< after a failure, before SIGKILL of the survivors
  /// After every member joined, end the run (shutdown) once this passed; 0: run until a failure.
  /// Not used with a recipe: the RL loop ends the run.
  std::chrono::milliseconds run_for{0};
  /// Set: the members get their data plane, engines and actors, and the controller runs the RL
  /// loop for `steps` steps (0: grpo.max_num_steps), then shuts the members down.
  std::optional<config::recipe_config> recipe;
  std::int64_t steps = 0;
  /// The run's files in its directory (orchestration/records/run_files.h), made by the caller
  /// before the run: the RL loop appends its records to them, and a record that cannot be written
  /// fails the run. Null files are not written.
  records::run_files records;
  /// Step checkpoints and the one this run resumes from (checkpoint_state.hpp).
  checkpoint_plan checkpoints;
  /// The dry run's memory plan per phase (a CUDA run's), put beside the device memory in use in
  /// every step's record and line; zero: none.
  memory_plan_figures memory_plan;
  /// Ranks 0 .. spawn_local-1 are started here; the others are started by a launcher and
  /// connect on their own. -1: every rank.
  std::int64_t spawn_local = -1;
  /// The run's keys (CurveZMQ on every socket); absent: no authentication or encryption, for runs
  /// whose every address is loopback (cluster.secure: false). Spawned members receive their
  /// credentials on an inherited descriptor (TANDEM_KEYS_FD), never on the command line.
  std::optional<run_keys> keys;
  /// The largest frame the control socket takes from a member (ZMQ_MAXMSGSIZE): what a stranger
  /// can make this process hold per connection before its handshake fails. A recipe's run sets
  /// it from the recipe (orchestration/control/frame_limits.hpp).
  std::size_t max_frame_bytes = control::max_frame_bytes;
  /// The `tandem` binary the local members run; empty: this process's own (/proc/self/exe).
  std::string member_executable;
  /// Progress lines ("controller listening on tcp://...", "spawned member 1 (pid 1234): ...",
  /// "... joined", "all 4 members joined", "... left after 9 heartbeats"); called on several
  /// threads, one call per line. Empty: none.
  std::function<void(const std::string&)> report;
  /// RL runs: each step's line in both forms (step_line.hpp; empty: its full form goes to report),
  /// and generation's advance within a step (trajectories done, of the step's total), called in
  /// the driver's context. Either may be empty.
  std::function<void(const step_line&)> step_lines;
  std::function<void(std::size_t done, std::size_t total)> progress;
};

/// How a run ended.
struct controller_result {
  bool ok = false;
  std::string message;  ///< ok: a summary; else the failure, naming the member and why
  int signal = 0;       ///< SIGINT or SIGTERM when one interrupted the run (the members were stopped)
};

/// Runs the controller until the run ends (see the header comment); blocks. Call it from the
/// thread that lives as long as the run (normally main): members' parent-death signal is tied to
/// the thread that forked them. SIGINT and SIGTERM are taken over for the call (blocked in every
/// thread it starts and waited for by one of them): the first stops the members in order and ends
/// the run with `signal` set; the signal mask is restored on return. Never throws.
controller_result run_controller(const controller_options& options);

}  // namespace tandem
