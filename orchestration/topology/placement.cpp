// Placing policy and rollout actors on member processes, one per device.
#include "orchestration/topology/placement.h"

namespace tandem::topology {

placement_plan plan_placement(const config::recipe_config& c) {
  placement_plan plan;
  plan.sizes = compute_worlds(c);
  plan.control_endpoint = "tcp://" + c.cluster.controller_host + ":" + std::to_string(c.cluster.controller_port);
  const std::int64_t N = c.cluster.num_nodes, G = c.cluster.gpus_per_node;
  std::int64_t dp = 0, rollout = 0;
  for (std::int64_t node = 0; node < N; ++node) {
    for (std::int64_t dev = 0; dev < G; ++dev) {
      member_plan w;
      w.rank = node * G + dev;
      w.node = node;
      w.device = dev;
      if (plan.sizes.colocated) {
        w.hosts_policy = w.hosts_rollout = true;
      } else if (N == 1) {
        w.hosts_policy = dev < plan.sizes.single_node_split;
        w.hosts_rollout = !w.hosts_policy;
      } else {
        w.hosts_policy = node < plan.sizes.training_nodes;
        w.hosts_rollout = !w.hosts_policy;
      }
      if (w.hosts_policy) w.data_parallel_rank = dp++;
      if (w.hosts_rollout) w.rollout_rank = rollout++;
      plan.members.push_back(w);
    }
  }
  return plan;
}

}  // namespace tandem::topology
