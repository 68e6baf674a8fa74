// Fault injection for the multi-process tests, switched on by the environment of a member (never
// by a recipe): a test proves what the runtime does when a weight bucket is corrupted in transit.
//
//   TANDEM_FAULT_CORRUPT_REFIT_PAYLOAD=N   the policy root flips one bit of the N-th (1-based)
//                                          bucket payload it broadcasts, after its checksum was taken
#pragma once

#include <memory>

#include "gpu/comm/communicator.h"

namespace tandem {

/// `group` itself, or a wrapper that corrupts as the environment asks (see above).
std::shared_ptr<gpu::communicator> with_injected_faults(std::shared_ptr<gpu::communicator> group);

}  // namespace tandem
