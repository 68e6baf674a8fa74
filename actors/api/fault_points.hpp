// Named fault-injection points, for the tests that kill a process at a known phase of a run
// (a checkpoint half written, a worker gone mid-step). Switched on by the environment of the
// process (never by a recipe):
//
//   TANDEM_FAULT_KILL_AT=POINT[@STEP][,POINT[@STEP]...]
//
// A process reaching POINT (of run step STEP, counted from 1 as the step lines count; of any step
// when @STEP is left out) writes "tandem: fault injection: killed at POINT of step STEP" to
// stderr and sends itself SIGKILL: the same end as `kill -9`, with no handler, destructor or flush
// run. The points, in the order a step reaches them:
//
//   generate            a rollout worker, as it starts a generate job of the step
//   train               a policy worker, as it starts a train job of the step
//   save_weights_before the policy rank writing a step checkpoint's state, before its first byte
//   save_weights_after  the same rank, the state complete in the partial checkpoint, not answered
//   rank_part_before    every policy rank, before its part of the checkpoint (its attestation)
//   rank_part_during    every policy rank, its part written and synced but not yet in place
//   rank_part_after     every policy rank, its part in place, not answered
//   commit_before       the controller, every part answered, before the completion manifest
//   commit_after        the controller, the checkpoint renamed into place, before old ones are pruned
//
// A save's step is the version it saves (the number of steps done).
#pragma once

#include <cstdint>
#include <string_view>

namespace tandem {

enum class fault_point {
  generate,
  train,
  save_weights_before,
  save_weights_after,
  rank_part_before,
  rank_part_during,
  rank_part_after,
  commit_before,
  commit_after,
};

/// The point's name as TANDEM_FAULT_KILL_AT spells it ("rank_part_during").
std::string_view to_string(fault_point p);

/// Kills this process (SIGKILL) when TANDEM_FAULT_KILL_AT names `p` for `step` (see above);
/// returns at once otherwise. The variable is read on every call, so a test may set it per process.
void reach(fault_point p, std::uint64_t step);

}  // namespace tandem
