// Member names for logs and failure messages.
#include "actors/controller/member_label.hpp"

namespace tandem {

std::string member_label(const topology::member_plan& w) {
  std::string roles;
  if (w.hosts_policy) roles += "policy-" + std::to_string(w.data_parallel_rank);
  if (w.hosts_rollout) roles += (roles.empty() ? "" : ", ") + std::string("rollout-") + std::to_string(w.rollout_rank);
  return "member " + std::to_string(w.rank) + " [" + (roles.empty() ? "no actors" : roles) + "]";
}

std::string member_name(const topology::member_plan& w, std::int64_t pid, const std::string& host) {
  return member_label(w) + " (pid " + std::to_string(pid) + (host.empty() ? "" : " on " + host) + ")";
}

}  // namespace tandem
