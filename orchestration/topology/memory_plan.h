// Per-device memory budget of each phase (training, logprobs, generation), estimated from the
// model's sizes and the recipe. Figures are plans, not measurements: the engines size their slabs
// and KV cache from the real free memory at run time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "orchestration/config/recipe.h"
#include "orchestration/topology/model_facts.h"
#include "orchestration/topology/worlds.h"

namespace tandem::topology {

struct memory_item {
  std::string what;    ///< "parameters (bfloat16, 1/8 shard)"
  double bytes = 0;
};

struct phase_budget {
  std::string phase;                 ///< "training", "logprobs", "generation"
  std::vector<memory_item> items;
  double total_bytes() const;
};

struct memory_plan {
  double device_bytes = 0;            ///< cluster.device_memory_gib
  phase_budget training;              ///< on each policy device
  phase_budget logprobs;              ///< on each policy device
  phase_budget generation;            ///< on each rollout device, KV cache last
  double kv_cache_bytes = 0;          ///< the KV cache: what generation leaves for it (may be < 0), at most what
                                      ///< policy.generation.max_num_sequences full-length sequences need
  double kv_cache_sequences = 0;      ///< sequences of max_total_sequence_length that fit in it
  double kv_cache_tokens = 0;         ///< kv_cache_sequences x max_total_sequence_length
  std::vector<std::string> warnings;  ///< phases over budget, a KV cache too small for one sequence
};

memory_plan plan_memory(const config::recipe_config& c, const worlds& w, const model_facts& m);

/// Device memory a CUDA process holds beyond its tensors in every phase: the context and
/// cuBLASLt's and cuDNN's handles and workspaces. Measured: 0.59 GiB in use on an H100 as a
/// colocated run of a 3 MiB model ended its training turn, 0.65 GiB as it ended generation.
constexpr double cuda_runtime_bytes = 0.6 * 1024.0 * 1024.0 * 1024.0;

/// Rows the generator's head makes logits for and samples at a time (gemma4_generate_engine.cpp's
/// head_chunk_rows).
constexpr std::int64_t generation_head_rows = 256;

/// The generator's head: its logits (compute dtype) and the sampler's float32 scratch for
/// min(max_num_sequences, generation_head_rows) rows of `vocab_size`.
double generation_head_bytes(const config::recipe_config& c, std::int64_t vocab_size);

/// What the generator needs beside its weights and KV cache: its head, and on CUDA the runtime's
/// memory. The KV cache is sized after it, by the plan and by the engine alike.
double generation_working_bytes(const config::recipe_config& c, std::int64_t vocab_size);

}  // namespace tandem::topology
