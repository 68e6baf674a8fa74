// How many devices and nodes train and generate, derived from a (valid) recipe's cluster section.
#pragma once

#include <cstdint>

#include "orchestration/config/recipe.h"

namespace tandem::topology {

struct worlds {
  bool colocated = true;
  std::int64_t training_nodes = 0;       ///< nodes holding training devices
  std::int64_t generation_nodes = 0;     ///< nodes holding generation devices (colocated: the same)
  std::int64_t training_devices = 0;     ///< = data-parallel size x tensor x context parallel sizes
  std::int64_t generation_devices = 0;   ///< one generator per device (tensor-parallel generation: 1)
  std::int64_t data_parallel_size = 0;
  /// Non-colocated on one node: training uses devices [0, split), generation [split, gpus_per_node).
  /// Several nodes: training uses nodes [0, training_nodes), generation the rest.
  std::int64_t single_node_split = 0;
};

/// The worlds of a recipe whose cluster rules hold (config::check_rules); zero sizes otherwise.
worlds compute_worlds(const config::recipe_config& c);

}  // namespace tandem::topology
