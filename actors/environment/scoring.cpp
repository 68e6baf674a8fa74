// Single-turn scoring (scoring.hpp).
#include "actors/environment/scoring.hpp"

#include <utility>

namespace tandem {

scoring_function single_turn(token_reward reward) {
  return [reward = std::move(reward)](const trajectory& t) {
    env_feedback out;
    out.reward = reward(t.tokens);
    return out;
  };
}

}  // namespace tandem
