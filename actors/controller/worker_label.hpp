// How the controller names a worker in every message a user reads: the rank, the actors it hosts,
// and (once known) the process, so "which process died" is answered by the name alone:
//   worker 1 [rollout-0] (pid 1234 on node03)
#pragma once

#include <cstdint>
#include <string>

#include "orchestration/topology/placement.h"

namespace tandem {

/// "worker 1 [rollout-0]", "worker 0 [policy-0, rollout-0]" (colocated), "worker 5 [no actors]".
std::string worker_label(const topology::worker_plan& w);

/// worker_label(w) + " (pid 1234 on node03)"; the host is left out when empty.
std::string worker_name(const topology::worker_plan& w, std::int64_t pid, const std::string& host);

}  // namespace tandem
