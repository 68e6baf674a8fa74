// The engine factory (engines.hpp).
#include "actors/worker/engines.hpp"

#include "actors/runtime/recipe_settings.hpp"
#include "gpu/engine/fake_generate_engine.h"
#include "gpu/engine/fake_train_engine.h"

namespace tandem {

gpu::result<worker_engines> make_engines(const config::recipe_config& recipe, bool policy, bool rollout,
                                         std::shared_ptr<gpu::communicator> data_parallel) {
  if (recipe.runtime.engine != config::engine_kind::fake)
    return gpu::status{gpu::status_code::unsupported,
                       "runtime.engine: gemma4: the Gemma 4 train and generate engines are not built yet; "
                       "runtime.engine=fake runs the whole runtime with deterministic fake engines"};
  const gpu::fake_model_options model = fake_model_settings(recipe);
  if (gpu::status s = gpu::check_fake_model_options(model); !s) return s;
  const gpu::train_engine_options train = train_engine_settings(recipe);
  if (gpu::status s = gpu::check_train_engine_options("policy", train); !s) return s;
  worker_engines out;
  out.data_parallel = std::move(data_parallel);
  std::shared_ptr<gpu::fake_train_engine> trainer;
  if (policy) {
    // The engine calls its group from the executor's thread: the engine keeps the group alive, so
    // a worker that ends mid-step (a shutdown, a failed run) never leaves a call on a freed group.
    trainer = std::shared_ptr<gpu::fake_train_engine>(new gpu::fake_train_engine(model, train, out.data_parallel.get()),
                                                      [group = out.data_parallel](gpu::fake_train_engine* e) { delete e; });
    out.train = trainer;
    out.weights_digest = [trainer] { return trainer->weights_digest(); };
  } else {
    out.weights_digest = [] { return std::uint64_t{0}; };
  }
  if (rollout) {
    gpu::fake_generate_options g;
    g.model = model;
    g.max_num_sequences = static_cast<std::int32_t>(recipe.policy.generation.max_num_sequences);
    g.bucket_bytes = refit_bucket_bytes(recipe);
    g.verify_checksums = false;  // the rollout worker checks every bucket's checksum itself
    auto generator = std::make_shared<gpu::fake_generate_engine>(g);
    if (trainer && recipe.policy.generation.colocated) {
      if (gpu::status s = generator->share_weights(trainer->shared_weights()); !s) return s;
    }
    out.rollout_layout = generator->manifest();
    out.generate = std::move(generator);
  }
  return out;
}

}  // namespace tandem
