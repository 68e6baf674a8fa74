// Classification of checkpoint tensor names for a text-only load.
#include "gpu/model/weight_plan.h"

#include <array>
#include <map>

#include "gpu/model/json_text.h"

namespace tandem::gpu {
namespace {

constexpr std::array<std::string_view, 6> prefixes{
    "model.vision_tower.",   "model.audio_tower.",    "model.embed_vision.",
    "model.embed_audio.",    "model.vision_embedder.", "model.multi_modal_projector.",
};

// "layers.17.self_attn.k_proj.weight" of a KV-shared layer 17: a weight Google's files ship and
// no forward reads.
bool is_unused_kv(const model_config& c, std::string_view local) {
  if (!local.starts_with("layers.")) return false;
  local.remove_prefix(7);
  const auto dot = local.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot > 4) return false;
  int layer = 0;
  for (char ch : local.substr(0, dot)) {
    if (ch < '0' || ch > '9') return false;
    layer = layer * 10 + (ch - '0');
  }
  if (std::to_string(layer) != local.substr(0, dot)) return false;  // no leading zeros
  if (layer >= c.num_hidden_layers || !c.layers[static_cast<std::size_t>(layer)].is_kv_shared) return false;
  const std::string_view rest = local.substr(dot + 1);
  return rest == "self_attn.k_proj.weight" || rest == "self_attn.v_proj.weight" || rest == "self_attn.k_norm.weight";
}

std::string expected_parts(const model_config& c, const std::string& text_prefix) {
  std::string s = "the text stack (" + quote_name(text_prefix) + ")";
  if (c.is_multimodal_file()) {
    s += ", lm_head.weight or a non-text part (";
    for (std::size_t i = 0; i < prefixes.size(); ++i) s += (i ? ", " : "") + std::string(prefixes[i]);
    s += ")";
  } else {
    s += " or lm_head.weight";
  }
  return s;
}

}  // namespace

std::span<const std::string_view> non_text_prefixes() { return prefixes; }

std::string_view to_string(tensor_role r) {
  switch (r) {
    case tensor_role::text: return "text";
    case tensor_role::tied_head: return "tied lm_head";
    case tensor_role::unused_kv: return "unused K/V of a KV-shared layer";
    case tensor_role::non_text: return "non-text";
  }
  return "?";
}

result<weight_plan> plan_weights(const model_config& config, const model_layout& layout,
                                 const std::vector<std::string>& names, const file_namer& file_of,
                                 const std::string& manifest) {
  const std::string text_prefix = hf_text_prefix(config);
  std::map<std::string, std::size_t, std::less<>> layout_of_name;  // full HF name -> layout index
  for (std::size_t i = 0; i < layout.tensors.size(); ++i) layout_of_name.emplace(hf_full_name(config, layout.tensors[i]), i);

  weight_plan plan;
  plan.layout_source.assign(layout.tensors.size(), SIZE_MAX);
  auto refuse = [&](const std::string& name, const std::string& why) {
    return status(status_code::invalid_argument, file_of(name) + ": tensor " + quote_name(name) + ": " + why);
  };
  for (const std::string& name : names) {
    planned_tensor p;
    p.name = name;
    if (auto it = layout_of_name.find(name); it != layout_of_name.end()) {
      if (plan.layout_source[it->second] != SIZE_MAX) return refuse(name, "appears twice");
      p.role = tensor_role::text;
      p.layout_index = it->second;
      plan.layout_source[it->second] = plan.tensors.size();
    } else if (name == "lm_head.weight") {
      // Untied heads are layout entries (found above); this one is tied to the embedding.
      p.role = tensor_role::tied_head;
      plan.tied_head = plan.tensors.size();
    } else if (name.starts_with(text_prefix)) {
      if (!is_unused_kv(config, std::string_view(name).substr(text_prefix.size())))
        return refuse(name, "inside the text stack, but the model's config has no such tensor");
      p.role = tensor_role::unused_kv;
    } else {
      for (std::string_view prefix : prefixes) {
        if (config.is_multimodal_file() && name.starts_with(prefix)) p.prefix = prefix;
      }
      if (p.prefix.empty()) return refuse(name, "not part of a " + std::string(to_string(config.model_type)) +
                                                    " checkpoint: expected " + expected_parts(config, text_prefix));
      p.role = tensor_role::non_text;
    }
    plan.tensors.push_back(std::move(p));
  }
  std::size_t missing = 0;
  const tensor_entry* first = nullptr;
  for (std::size_t i = 0; i < layout.tensors.size(); ++i) {
    if (plan.layout_source[i] == SIZE_MAX && missing++ == 0) first = &layout.tensors[i];
  }
  if (missing > 0)
    return status(status_code::invalid_argument,
                  manifest + ": missing tensor " + quote_name(hf_full_name(config, *first)) +
                      (missing > 1 ? " (and " + std::to_string(missing - 1) + " more of the text stack)" : ""));
  return plan;
}

}  // namespace tandem::gpu
