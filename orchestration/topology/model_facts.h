// What the planner needs to know about a model, as plain numbers (filled from gpu/model by the
// tools, so orchestration/ stays free of the compute module).
#pragma once

#include <cstdint>
#include <string>

namespace tandem::topology {

struct model_facts {
  std::string name;                   ///< preset name or checkpoint directory
  std::string model_type;             ///< config.json model_type
  std::int64_t num_layers = 0;
  std::int64_t hidden_size = 0;
  std::int64_t vocab_size = 0;
  std::int64_t max_position_embeddings = 0;
  std::int64_t parameters = 0;             ///< elements of the text stack (tied head counted once)
  std::int64_t largest_gathered_unit = 0;  ///< elements of the largest layer or embedding table
  /// K and V elements cached per token by layers that keep every position (full attention) and
  /// by sliding-window layers, which keep at most sliding_window positions of a sequence.
  std::int64_t kv_elements_per_token_full = 0;
  std::int64_t kv_elements_per_token_sliding = 0;
  std::int64_t sliding_window = 0;
  /// Activation elements kept per token for backward, summed over layers, per recompute mode.
  std::int64_t saved_activations_none = 0;
  std::int64_t saved_activations_selective = 0;
  std::int64_t saved_activations_full = 0;
  /// Transient activation elements per token of the widest single layer (forward or recompute).
  std::int64_t layer_working_activations = 0;
};

}  // namespace tandem::topology
