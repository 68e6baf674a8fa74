// The controller's RL loop over the workers' remote proxies (DESIGN.md sections 1 and 4): the
// refit handshake, then one driver step after another, a progress line and metrics records per
// step, and the outcome to the controller actor.
//
//   handshaking --every rollout worker accepted policy rank 0's manifest--> stepping(1)
//   stepping(n) --step report--> step line, metrics.jsonl, generations.jsonl --> stepping(n + 1)
//               (records number steps from 1; a trajectory's rng.step is the 0-based step of its RNG)
//               --the last step--> (rl_done, true, summary)
//   rl_stop --the step in flight ends--> (rl_done, true, "N of M steps done; stopped on request")
//   any failure (handshake, a step: a worker's error, a deadline, a lost worker)
//               --> (rl_done, false, why naming the worker)
//
// Refits: colocated runs bump the version over the shared weights; dedicated runs stream every
// bucket from the policy root to the rollout workers over the refit group (refit_stream.hpp), so
// the controller's traffic per step does not grow with the model.
// Each step line and record carries the control bytes the controller moved during the step
// (heartbeats apart) and the weights digest of every policy rank.
#pragma once

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
#include "orchestration/config/recipe.h"

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
};

/// Spawns the loop, which starts with the handshake at once.
caf::actor spawn_rl_loop(caf::actor_system& sys, rl_loop_settings settings);

/// The prompt set of runtime.engine fake: `count` prompts of 3 to 8 tokens in [2, vocab), a pure
/// function of the seed.
std::vector<std::vector<std::int32_t>> fake_prompts(std::uint64_t seed, std::size_t count, std::int32_t vocab);

}  // namespace tandem
