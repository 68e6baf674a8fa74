// Training and generation world sizes from the cluster and generation resources.
#include "orchestration/topology/worlds.h"

namespace tandem::topology {

worlds compute_worlds(const config::recipe_config& c) {
  worlds w;
  const auto& g = c.policy.generation;
  const std::int64_t N = c.cluster.num_nodes, G = c.cluster.gpus_per_node;
  const std::int64_t model_parallel = c.policy.tensor_parallel_size * c.policy.context_parallel_size;
  w.colocated = g.colocated;
  if (g.colocated) {
    w.training_nodes = w.generation_nodes = N;
    w.training_devices = w.generation_devices = N * G;
  } else if (N == 1) {
    const std::int64_t gen = g.resources.gpus_per_node.value_or(0);
    if (gen <= 0 || gen >= G) return worlds{};
    w.training_nodes = w.generation_nodes = 1;
    w.generation_devices = gen;
    w.training_devices = G - gen;
    w.single_node_split = G - gen;
  } else {
    const std::int64_t gen_nodes = g.resources.num_nodes.value_or(0);
    if (gen_nodes <= 0 || gen_nodes >= N) return worlds{};
    w.generation_nodes = gen_nodes;
    w.training_nodes = N - gen_nodes;
    w.generation_devices = gen_nodes * G;
    w.training_devices = w.training_nodes * G;
  }
  w.data_parallel_size = w.training_devices / model_parallel;
  return w;
}

}  // namespace tandem::topology
