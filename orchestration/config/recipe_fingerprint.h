// What a resumed run must share with the run that wrote its checkpoint: every recipe key except
// those a user may change across a resume, and a fingerprint of them.
//
// Changeable across a resume (they change neither what is computed nor in which order):
//   the run's length        grpo.max_num_steps, grpo.max_num_epochs
//   logging                 logger.*
//   checkpoints             checkpointing.* except save_optimizer (period, retention, directory)
//   placement and waiting   cluster.num_nodes, cluster.gpus_per_node, cluster.device_memory_gib,
//                           cluster.controller_host, cluster.controller_port,
//                           policy.generation.colocated.resources.*, runtime.heartbeat_interval_ms,
//                           runtime.heartbeat_timeout_ms, runtime.request_timeout_s, env.num_workers
// The number of data-parallel policy ranks follows the placement: a run may resume with another,
// and then agrees with the uninterrupted run within float32 reduction order (the gradients are
// summed in another order), not bit for bit.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "orchestration/config/resolve.h"

namespace tandem::config {

/// Whether `key` (a schema key) may differ between a checkpoint's recipe and the resumed run's.
bool changeable_across_resume(const std::string& key);

/// Every key of `r` that must not change across a resume, with its value as YAML flow text.
std::map<std::string, std::string> resume_values(const resolved_recipe& r);

/// 16 hex digits (FNV-1a, 64 bits) over "key=value\n" of `values` in key order: equal values,
/// equal fingerprints, on every machine.
std::string recipe_fingerprint(const std::map<std::string, std::string>& values);

/// One line per key whose value differs ("grpo.seed: 7 in the checkpoint, 8 now"; a key only one
/// side has: "... not in the checkpoint" / "... not in this build's recipes"), in key order.
std::vector<std::string> differing_keys(const std::map<std::string, std::string>& saved,
                                        const std::map<std::string, std::string>& now);

}  // namespace tandem::config
