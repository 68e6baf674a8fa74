// Worker names for logs and failure messages.
#include "actors/controller/worker_label.hpp"

namespace tandem {

std::string worker_label(const topology::worker_plan& w) {
  std::string roles;
  if (w.hosts_policy) roles += "policy-" + std::to_string(w.data_parallel_rank);
  if (w.hosts_rollout) roles += (roles.empty() ? "" : ", ") + std::string("rollout-") + std::to_string(w.rollout_rank);
  return "worker " + std::to_string(w.rank) + " [" + (roles.empty() ? "no actors" : roles) + "]";
}

std::string worker_name(const topology::worker_plan& w, std::int64_t pid, const std::string& host) {
  return worker_label(w) + " (pid " + std::to_string(pid) + (host.empty() ? "" : " on " + host) + ")";
}

}  // namespace tandem
