// How the controller names a member in every message a user reads: the rank, the actors it hosts,
// and (once known) the process, so "which process died" is answered by the name alone:
//   member 1 [rollout-0] (pid 1234 on node03)
#pragma once

#include <cstdint>
#include <string>

#include "orchestration/topology/placement.h"

namespace tandem {

/// "member 1 [rollout-0]", "member 0 [policy-0, rollout-0]" (colocated), "member 5 [no actors]".
std::string member_label(const topology::member_plan& w);

/// member_label(w) + " (pid 1234 on node03)"; the host is left out when empty.
std::string member_name(const topology::member_plan& w, std::int64_t pid, const std::string& host);

}  // namespace tandem
