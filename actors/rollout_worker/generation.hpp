// One generation job run to completion on a generate_engine: submit, step until nothing waits or
// runs, collect, and turn the finished sequences into trajectories. Runs on the rollout worker's
// engine thread (or inline in tests); blocking.
#pragma once

#include <string>
#include <vector>

#include "actors/api/messages.hpp"
#include "gpu/core/status.h"
#include "gpu/engine/generate_engine.h"

namespace tandem {

/// The trajectories of `job`, in the order of its requests, each carrying the weight version that
/// generated it, which must be job.version for every one (else device_error "mixed versions").
/// On a failed step() the engine is drained (stepped until empty, results discarded) so the
/// worker stays usable, and the status says why. `worker` names the trajectories' origin.
gpu::result<std::vector<trajectory>> run_generation(gpu::generate_engine& engine, const generate_job& job,
                                                    const std::string& worker);

}  // namespace tandem
