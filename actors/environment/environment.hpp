// The environment: scores trajectories on a pool of worker actors (DESIGN.md section 6).
//
//   score(job) --> split into contiguous chunks, one per worker (round robin over jobs)
//              --> each worker runs the scoring function over its chunk
//              --> answers gathered in job order --> score_result
//
// Any number of jobs may be in flight; a worker failing or missing the deadline fails the job
// (timeout / peer_lost) naming the worker. The workers are linked to the pool.
#pragma once

#include <chrono>
#include <cstddef>

#include <caf/actor_system.hpp>

#include "actors/api/engine_call.hpp"
#include "actors/api/environment_actor.hpp"
#include "actors/environment/scoring.hpp"

namespace tandem {

struct environment_config {
  std::size_t workers = 2;              ///< scoring workers, >= 1 (0 is taken as 1)
  scoring_function score;               ///< required: the reward (engine_factory.hpp reward_for gives the recipe's)
  /// off_scheduler (production): each worker is a detached actor (slow scorers such as a math
  /// checker do not hold CAF's scheduler threads); inline_calls (deterministic tests): workers
  /// are ordinary actors that the test coordinator runs.
  engine_execution execution = engine_execution::off_scheduler;
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};  ///< per chunk
};

/// Spawns the environment pool (and its workers).
environment_actor spawn_environment(caf::actor_system& sys, environment_config config);

/// One scoring worker (the pool spawns these; usable alone as a single-worker environment).
environment_actor::behavior_type environment_worker(environment_actor::pointer self, scoring_function score);

}  // namespace tandem
