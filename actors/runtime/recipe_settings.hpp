// The settings both ends of a run derive from the resolved recipe, in one place: the controller
// (driver, refit) and every member (engines, loss) read the same recipe from the welcome, so the
// loss settings and sampling need not travel in every request. The engines themselves, and what
// runtime.engine builds, are the engine factory's (engine_factory.hpp).
#pragma once

#include "gpu/engine/train_engine.h"
#include "gpu/ops/logprobs.h"
#include "gpu/ops/pg_loss.h"
#include "orchestration/config/recipe.h"

namespace tandem {

/// loss_fn.* as the policy-gradient loss takes them.
gpu::ops::pg_loss_settings loss_settings(const config::recipe_config& recipe);

/// policy.generation temperature, top_k, top_p.
gpu::ops::sampling_params sampling_settings(const config::recipe_config& recipe);

/// How every train engine trains: policy.optimizer.*, policy.scheduler.*, policy.max_grad_norm
/// (null: 0, no clipping), policy.recompute_granularity, policy.logprob_chunk_size.
gpu::train_engine_options train_engine_settings(const config::recipe_config& recipe);

/// Tokens of one training micro-batch: policy.train_micro_batch_size full-length samples
/// (policy.max_total_sequence_length tokens each); short samples share a pass.
std::int64_t micro_batch_token_budget(const config::recipe_config& recipe);

/// policy.refit.bucket_mb in bytes.
std::int64_t refit_bucket_bytes(const config::recipe_config& recipe);

}  // namespace tandem
