// The CAF actor-system configuration every tandem process starts from: a capped scheduler (each
// process gets its share of the node's cores) and tandem's error category registered.
#pragma once

#include <cstddef>

#include <caf/actor_system_config.hpp>

namespace tandem {

/// Scheduler threads for one of `processes` processes sharing `cores` cores: at least 1.
std::size_t scheduler_threads(std::size_t cores, std::size_t processes);

class system_config : public caf::actor_system_config {
 public:
  /// `threads`: CAF scheduler threads of this process (see scheduler_threads()).
  explicit system_config(std::size_t threads);
};

}  // namespace tandem
