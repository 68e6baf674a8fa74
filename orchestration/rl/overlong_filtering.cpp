// Overlong filtering (overlong_filtering.h).
#include "orchestration/rl/overlong_filtering.h"

namespace tandem::rl {

std::vector<double> overlong_loss_multipliers(bool enabled, std::span<const sample_outcome> samples) {
  std::vector<double> out(samples.size(), 1.0);
  if (!enabled) return out;
  for (std::size_t i = 0; i < samples.size(); ++i)
    if (samples[i].truncated) out[i] = 0.0;
  return out;
}

}  // namespace tandem::rl
