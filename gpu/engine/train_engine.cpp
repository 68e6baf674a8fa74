// The train_engine contract's default step: micro-batches, then the optimizer.
#include "gpu/engine/train_engine.h"

#include <string>

namespace tandem::gpu {

result<train_step_result> train_engine::train_step(const std::vector<train_micro_batch_data>& micro_batches,
                                                   const ops::pg_loss_settings& loss, const global_counts& counts,
                                                   const ops::sampling_params& params) {
  train_step_result out;
  for (std::size_t i = 0; i < micro_batches.size(); ++i) {
    auto m = train_micro_batch(micro_batches[i], loss, counts, params);
    if (!m) {
      zero_gradients();
      return status{m.error().code(), "micro-batch " + std::to_string(i) + ": " + m.error().message()};
    }
    if (i == 0) out.metrics = m.value();
    else out.metrics.merge(m.value());
  }
  auto opt = optimizer_step();
  if (!opt) return status{opt.error().code(), "optimizer step: " + opt.error().message()};
  out.optimizer = opt.value();
  return out;
}

}  // namespace tandem::gpu
