// The per-model tensor table (DESIGN.md §3): every text-stack tensor of a Gemma 4 config with its
// Hugging Face name, shape, dtype and offset into one contiguous slab. Gemma 4 layers differ in
// shape, so all addressing goes through this table, never `base + layer * size`. It drives
// checkpoint load/save, sharding and refit bucketing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "gpu/core/dtype.h"
#include "gpu/model/config.h"

namespace tandem::gpu {

/// One tensor of the text stack.
struct tensor_entry {
  std::string name;  ///< HF name without the text prefix: "layers.3.self_attn.q_proj.weight"
  std::vector<int64_t> shape;   ///< HF shape, row-major, e.g. [out, in] for a linear weight
  dtype type = dtype::float32;  ///< element type in the slab
  int64_t offset_elements = 0;  ///< first element of this tensor in its slab
  int layer = -1;               ///< decoder layer index, -1 for top-level tensors
  /// False for layer_scalar, a persistent buffer in transformers (saved and loaded, never
  /// trained): optimizers leave it as it is and gradient norms leave it out.
  bool trainable = true;

  /// Product of the shape.
  int64_t elements() const;
  /// elements() * size_of(type).
  int64_t bytes() const { return elements() * static_cast<int64_t>(size_of(type)); }
};

/// Every tensor's offset is a multiple of this many elements (256 bytes in float32, 128 in
/// bfloat16): vector loads and cuBLASLt want aligned operands, and a one-element layer_scalar must
/// not misalign every tensor after it.
inline constexpr int64_t layout_alignment_elements = 64;

/// All tensors of one model, in a fixed order (top-level, then layer 0, 1, ...; within a layer in
/// forward order), each at the next multiple of layout_alignment_elements: offsets start at 0 and
/// increase; the gaps between tensors are padding (zero in a fresh slab).
struct model_layout {
  std::vector<tensor_entry> tensors;     ///< the table, in slab order
  int64_t total_elements = 0;            ///< the slab size in elements, padding included
  int64_t parameter_count = 0;           ///< sum of elements(): the model's size
  std::vector<std::size_t> layer_begin;  ///< size L+1: layer l holds tensors [begin[l], begin[l+1])
  std::map<std::string, std::size_t, std::less<>> index;  ///< name -> position in `tensors`

  /// The entry called `name` (without the text prefix), or nullptr.
  const tensor_entry* find(std::string_view name) const;
  /// Slab size in bytes (total_elements in the layout's dtype).
  int64_t total_bytes() const;
};

/// The tensor table of `config` with every tensor in `type`. Exactly the tensors of
/// docs/gemma4.md §3.2/§3.3: no K/V weights on KV-shared layers, no v_proj on
/// attention_k_eq_v full layers, PLE tensors when P > 0, MoE tensors when enabled, and
/// lm_head.weight [V, H] only when tie_word_embeddings is false.
model_layout build_layout(const model_config& config, dtype type);

/// Prefix of the text tensors in a Hugging Face checkpoint: "model.language_model." for
/// gemma4 / gemma4_unified files, "model." for text-only files.
std::string hf_text_prefix(const model_config& config);

/// Full Hugging Face name of an entry: the text prefix plus its name, except "lm_head.weight",
/// which sits outside the text model in every wrapper.
std::string hf_full_name(const model_config& config, const tensor_entry& entry);

/// Elements of the parameters (and the layer_scalar buffer) of decoder layer `layer`; 0 when
/// `layer` is not in [0, L).
int64_t layer_parameter_count(const model_config& config, int layer);

/// KV-cache bytes one token occupies in `type`: the sum over non-shared layers of
/// 2 * kv_l * head_dim_l * size_of(type) (V is stored separately even with attention_k_eq_v).
int64_t kv_cache_bytes_per_token(const model_config& config, dtype type);

}  // namespace tandem::gpu
