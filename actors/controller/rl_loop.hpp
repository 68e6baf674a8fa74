// The controller's RL loop over the members' remote proxies (DESIGN.md sections 1 and 4): the
// refit handshake, then one driver step after another, a progress line and metrics records per
// step, and the outcome to the controller actor.
//
//   start --the engine factory's training_prompts, reward_for and, when validating,
//         validation_prompts (engine_factory.hpp)--> handshaking
//         --any refused--> (rl_done, false, why naming the recipe key)
//   handshaking --every rollout worker accepted policy rank 0's manifest--> stepping(1)
//               (grpo.val_at_start: --> validating(0) --> stepping(1))
//               (resuming from step_N: --> loading: every policy rank loads its weights, one
//               refit makes them live --> stepping(N + 1); no val_at_start pass)
//   stepping(n) --step report--> step line, generations.jsonl, metrics.jsonl --> stepping(n + 1)
//               (a validation pass due after step n: --step report--> step line --> validating(n)
//               --report--> validation line, the step's records with its validation metrics
//               --> stepping(n + 1); due when n % grpo.val_period == 0, or n is the last step and
//               grpo.val_at_end; validating(0)'s record is step 0's, validation metrics only)
//               (records number steps from 1; a trajectory's rng.step is the 0-based step of its RNG;
//               a step's metrics record follows all its trajectories)
//               (checkpointing: after step n's records, when n % save_period == 0 or n is the
//               last step --> checkpointing(n): the two-phase save into CHECKPOINT_DIR/step_n,
//               retention --> stepping(n + 1); a failed save ends the run naming the rank or
//               path, the previous checkpoint intact)
//               --the last step--> saving: policy rank 0 saves its weights into
//               RUN_DIR/final_weights (save_job) --saved--> (rl_done, true, summary and where
//               they are) | --failed--> (rl_done, false, why)
//               --a record that cannot be written (or controller.log failed)--> (rl_done, false,
//               "cannot write DIR/generations.jsonl: No space left on device"); the file keeps
//               only whole records (orchestration/records/record_file.h)
//   rl_stop --the step in flight ends--> saving (as after the last step) --> (rl_done, true, "N of M
//           steps done; stopped on request; final weights (vN) in DIR")
//   any failure (handshake, a step, a validation pass: a member's error, a deadline, a lost
//               member) --> (rl_done, false, why naming the member)
//
// Refits: colocated runs bump the version over the shared weights; dedicated runs stream every
// bucket from the policy root to the rollout workers over the refit group (refit_stream.hpp), so
// the controller's traffic per step does not grow with the model.
// Each step line and record carries the control bytes the controller moved during the step
// (heartbeats apart) and the weights digest of every policy rank.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/atom.hpp>

#include "actors/api/policy_actor.hpp"
#include "actors/api/rollout_actor.hpp"
#include "actors/bridge/socket_thread.hpp"
#include "actors/controller/memory_plan_figures.hpp"
#include "actors/controller/step_line.hpp"
#include "orchestration/config/recipe.h"
#include "actors/controller/checkpoint_state.hpp"
#include "orchestration/records/run_files.h"

namespace tandem {

/// (rl_done, ok, message): how the loop ended, sent to the listener once.
using rl_done_atom = caf::atom_constant<caf::atom("rl_done")>;
/// (rl_stop): finish the step in flight (its records written whole), start no other, then
/// (rl_done, true, "N of M steps done; stopped on request").
using rl_stop_atom = caf::atom_constant<caf::atom("rl_stop")>;

struct rl_loop_settings {
  config::recipe_config recipe;
  std::vector<policy_actor> policy;    ///< data-parallel rank order
  std::vector<rollout_actor> rollout;  ///< rollout rank order
  std::int64_t steps = 0;              ///< 0: grpo.max_num_steps
  std::shared_ptr<socket_thread> socket;  ///< the controller's; its traffic counts per step
  caf::actor listener;                 ///< receives rl_done
  std::function<void(const std::string&)> report;  ///< progress lines; may be empty
  /// Each step's line in both forms (step_line.hpp); empty: its full form goes to report.
  std::function<void(const step_line&)> step_lines;
  /// Generation's advance within a step: trajectories done of the step's total, at 0 and as each
  /// rollout worker answers (driver_config::on_generation_progress; the driver's context); may be empty.
  std::function<void(std::size_t done, std::size_t total)> progress;
  /// The run's files in its directory (created by `tandem run`); a null file is not written.
  records::run_files records;
  /// Step checkpoints (checkpointing.*) and the one this run resumes from: the members load it
  /// after the handshake, the driver goes on from its snapshot (checkpoint_state.hpp).
  checkpoint_plan checkpoints;
  /// The dry run's memory plan per phase, put beside the memory in use in each step's record and
  /// line; zero: none.
  memory_plan_figures memory_plan;
};

/// Spawns the loop, which starts with the handshake at once.
caf::actor spawn_rl_loop(caf::actor_system& sys, rl_loop_settings settings);

}  // namespace tandem
