// The fake environment's scoring (scoring.hpp).
#include "actors/environment/scoring.hpp"

namespace tandem {

env_feedback parity_reward(const trajectory& t) {
  env_feedback out;
  out.reward = !t.tokens.empty() && t.tokens.back() % 2 == 0 ? 1.0 : 0.0;
  return out;
}

}  // namespace tandem
