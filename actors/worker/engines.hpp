// The engines behind a worker's actors, chosen by runtime.engine: fake (deterministic stand-ins,
// gpu/engine/fake_*.h) today; the Gemma 4 engines join in the compute-path issues.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "gpu/comm/communicator.h"
#include "gpu/core/status.h"
#include "gpu/engine/generate_engine.h"
#include "gpu/engine/train_engine.h"
#include "gpu/engine/weight_manifest.h"
#include "orchestration/config/recipe.h"

namespace tandem {

struct worker_engines {
  std::shared_ptr<gpu::train_engine> train;        ///< when the worker hosts a policy rank
  std::shared_ptr<gpu::generate_engine> generate;  ///< when it hosts a rollout worker
  gpu::weight_manifest rollout_layout;             ///< the generator's own layout (the policy's manifest must equal it)
  /// A hash of the trainer's weights now (0: the engine offers none); called between engine calls.
  std::function<std::uint64_t()> weights_digest;
  std::shared_ptr<gpu::communicator> data_parallel;  ///< kept alive as long as the trainer uses it
};

/// The engines for a worker hosting a policy rank and/or a rollout worker. Colocated: the
/// generator reads the trainer's weights in place. `data_parallel` is the ring of the policy ranks
/// (null for a single rank). Fails (unsupported) for runtime.engine gemma4 until its engines exist.
gpu::result<worker_engines> make_engines(const config::recipe_config& recipe, bool policy, bool rollout,
                                         std::shared_ptr<gpu::communicator> data_parallel);

}  // namespace tandem
