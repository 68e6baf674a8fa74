// What a rollout hands the RL step for one sample: the environment's raw reward, how long the
// response ran and whether generation stopped at the length limit instead of finishing.
#pragma once

#include <cstdint>

namespace tandem::rl {

struct sample_outcome {
  double raw_reward = 0;             ///< the environment's reward, before scaling and shaping
  std::int64_t response_length = 0;  ///< generated tokens of the response
  bool truncated = false;            ///< generation hit max_new_tokens before a stop token
};

}  // namespace tandem::rl
