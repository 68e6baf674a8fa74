// Which tensors of a checkpoint a text-only load takes, from their names alone (so a published
// index can be planned without its weights): exactly the layout's tensors under the text prefix
// ("model." for Gemma4ForCausalLM, "model.language_model." for the gemma4 and gemma4_unified
// wrappers); the non-text parts of a wrapper (vision and audio towers, their embedders),
// recognised by exact prefix and skipped; the K/V weights that Google's files still ship for
// KV-shared layers, ignored; a tied lm_head.weight, checked against the embedding. Anything else
// is an error, as is a layout tensor the checkpoint lacks.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpu/core/status.h"
#include "gpu/model/config.h"
#include "gpu/model/layout.h"

namespace tandem::gpu {

/// Prefixes of the non-text parts of the gemma4 / gemma4_unified wrappers, each ending in '.'.
std::span<const std::string_view> non_text_prefixes();

enum class tensor_role {
  text,       ///< a tensor of the layout: loaded into the slab
  tied_head,  ///< lm_head.weight of a tied model: must equal the embedding; not loaded
  unused_kv,  ///< k_proj / v_proj / k_norm of a KV-shared layer: never used, carried on save
  non_text,   ///< outside the text stack: skipped, carried on save
};

std::string_view to_string(tensor_role r);

struct planned_tensor {
  std::string name;  ///< full Hugging Face name, as in the checkpoint
  tensor_role role = tensor_role::text;
  std::size_t layout_index = 0;  ///< text: position of its entry in the layout
  std::string_view prefix;       ///< non_text: the prefix it was recognised by
};

struct weight_plan {
  std::vector<planned_tensor> tensors;      ///< every checkpoint tensor, in checkpoint order
  std::vector<std::size_t> layout_source;   ///< layout index -> position in `tensors`
  std::optional<std::size_t> tied_head;     ///< position of a tied lm_head.weight, if present
};

/// Names the file that holds tensor `name`, for messages.
using file_namer = std::function<std::string(const std::string& name)>;

/// Plans a load of `names` (the checkpoint's tensors, in its order) into `layout`. An unexpected
/// tensor is an error naming its file (`file_of`); a missing one names `manifest` (the index or
/// the single file). Errors are invalid_argument and name the tensor.
result<weight_plan> plan_weights(const model_config& config, const model_layout& layout,
                                 const std::vector<std::string>& names, const file_namer& file_of,
                                 const std::string& manifest);

}  // namespace tandem::gpu
