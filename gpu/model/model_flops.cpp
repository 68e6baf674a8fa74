// Matrix FLOPs by the definition in model_flops.h.
#include "gpu/model/model_flops.h"

#include <algorithm>

namespace tandem::gpu {

double forward_flops(const model_config& c, const model_layout& layout, std::int64_t sequences, std::int64_t length) {
  double per_token = 0;
  for (const auto& e : layout.tensors) {
    if (e.shape.size() < 2 || e.name.starts_with("embed_tokens")) continue;
    double weights = static_cast<double>(e.elements());
    if (e.name.find("experts.") != std::string::npos)  // only top_k of the experts run per token
      weights *= static_cast<double>(c.top_k_experts) / static_cast<double>(c.num_experts);
    per_token += 2.0 * weights;
  }
  per_token += 2.0 * static_cast<double>(c.vocab_size) * static_cast<double>(c.hidden_size);  // the tied head
  const auto n = static_cast<double>(length);
  double attention = 0;  // per sequence
  for (const auto& L : c.layers) {
    // Σ over positions p of the keys query p reads.
    double keys = n * (n + 1) / 2;
    if (L.type == layer_type::sliding && c.sliding_window > 0 && length > c.sliding_window) {
      const auto w = static_cast<double>(c.sliding_window);
      keys = w * (w + 1) / 2 + (n - w) * w;
    }
    attention += 4.0 * keys * static_cast<double>(c.num_attention_heads) * static_cast<double>(L.head_dim);
  }
  return static_cast<double>(sequences) * (per_token * n + attention);
}

}  // namespace tandem::gpu
