// The placement plan: which member process, on which node and device, hosts which actors.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "orchestration/config/recipe.h"
#include "orchestration/topology/worlds.h"

namespace tandem::topology {

/// One `tandem join` process: it owns one device.
struct member_plan {
  std::int64_t rank = 0;          ///< member rank in the job (0 .. world-1), node-major
  std::int64_t node = 0;
  std::int64_t device = 0;        ///< local device index on its node
  bool hosts_policy = false;      ///< a policy_worker actor (training)
  bool hosts_rollout = false;     ///< a rollout_worker actor (generation)
  std::int64_t data_parallel_rank = -1;  ///< policy ranks only
  std::int64_t rollout_rank = -1;        ///< rollout ranks only
};

struct placement_plan {
  worlds sizes;
  std::vector<member_plan> members;  ///< ordered by rank
  std::string control_endpoint;      ///< tcp://host:port of the controller's ROUTER socket
};

/// The plan of a recipe that passed config::check_rules.
placement_plan plan_placement(const config::recipe_config& c);

}  // namespace tandem::topology
