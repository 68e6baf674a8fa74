// Builds the tensor table of a Gemma 4 text stack (docs/gemma4.md §3.2, §3.3) and the
// sizes derived from it.
#include "gpu/model/layout.h"

namespace tandem::gpu {
namespace {

// Appends the tensors of one table section, each given its name and shape.
class table_writer {
 public:
  table_writer(std::vector<tensor_entry>& out, dtype type, int layer)
      : out_(out), type_(type), layer_(layer) {
    if (layer >= 0) prefix_ = "layers." + std::to_string(layer) + ".";
  }

  void add(std::string_view name, std::vector<int64_t> shape) {
    out_.push_back(tensor_entry{prefix_ + std::string(name), std::move(shape), type_, 0, layer_, name != "layer_scalar"});
  }

 private:
  std::vector<tensor_entry>& out_;
  dtype type_;
  int layer_;
  std::string prefix_;
};

// Top-level tensors: embeddings, PLE model-level tensors, final norm, untied head.
void append_top_level(const model_config& c, dtype type, std::vector<tensor_entry>& out) {
  table_writer w(out, type, -1);
  const int64_t h = c.hidden_size;
  const int64_t p = c.hidden_size_per_layer_input;
  const int64_t lp = static_cast<int64_t>(c.num_hidden_layers) * p;
  w.add("embed_tokens.weight", {c.vocab_size, h});
  if (p > 0) {
    w.add("embed_tokens_per_layer.weight", {c.vocab_size_per_layer_input, lp});
    w.add("per_layer_model_projection.weight", {lp, h});
    w.add("per_layer_projection_norm.weight", {p});
  }
  w.add("norm.weight", {h});
  if (!c.tie_word_embeddings) w.add("lm_head.weight", {c.vocab_size, h});
}

// The tensors of decoder layer l, in forward order (§2.4).
void append_layer(const model_config& c, int l, dtype type, std::vector<tensor_entry>& out) {
  table_writer w(out, type, l);
  const layer_config& layer = c.layers[static_cast<std::size_t>(l)];
  const int64_t h = c.hidden_size;
  const int64_t d = layer.head_dim;
  const int64_t q_width = c.num_attention_heads * d;
  const int64_t kv_width = layer.num_key_value_heads * d;
  const int64_t i = layer.intermediate_size;

  w.add("input_layernorm.weight", {h});
  w.add("self_attn.q_proj.weight", {q_width, h});
  w.add("self_attn.q_norm.weight", {d});
  if (!layer.is_kv_shared) {
    w.add("self_attn.k_proj.weight", {kv_width, h});
    w.add("self_attn.k_norm.weight", {d});
    if (!layer.k_eq_v) w.add("self_attn.v_proj.weight", {kv_width, h});
  }
  w.add("self_attn.o_proj.weight", {h, q_width});
  w.add("post_attention_layernorm.weight", {h});

  w.add("pre_feedforward_layernorm.weight", {h});
  w.add("mlp.gate_proj.weight", {i, h});
  w.add("mlp.up_proj.weight", {i, h});
  w.add("mlp.down_proj.weight", {h, i});
  if (c.enable_moe_block) {
    const int64_t e = c.num_experts;
    const int64_t im = c.moe_intermediate_size;
    w.add("post_feedforward_layernorm_1.weight", {h});
    w.add("router.proj.weight", {e, h});
    w.add("router.scale", {h});
    w.add("router.per_expert_scale", {e});
    w.add("pre_feedforward_layernorm_2.weight", {h});
    w.add("experts.gate_up_proj", {e, 2 * im, h});
    w.add("experts.down_proj", {e, h, im});
    w.add("post_feedforward_layernorm_2.weight", {h});
  }
  w.add("post_feedforward_layernorm.weight", {h});

  const int64_t p = c.hidden_size_per_layer_input;
  if (p > 0) {
    w.add("per_layer_input_gate.weight", {p, h});
    w.add("per_layer_projection.weight", {h, p});
    w.add("post_per_layer_input_norm.weight", {h});
  }
  w.add("layer_scalar", {1});
}

int64_t sum_elements(const std::vector<tensor_entry>& tensors) {
  int64_t n = 0;
  for (const tensor_entry& t : tensors) n += t.elements();
  return n;
}

}  // namespace

int64_t tensor_entry::elements() const {
  int64_t n = 1;
  for (int64_t extent : shape) n *= extent;
  return n;
}

const tensor_entry* model_layout::find(std::string_view name) const {
  auto it = index.find(name);
  return it == index.end() ? nullptr : &tensors[it->second];
}

int64_t model_layout::total_bytes() const {
  return tensors.empty() ? 0 : total_elements * static_cast<int64_t>(size_of(tensors.front().type));
}

model_layout build_layout(const model_config& config, dtype type) {
  model_layout layout;
  append_top_level(config, type, layout.tensors);
  for (int l = 0; l < config.num_hidden_layers; ++l) {
    layout.layer_begin.push_back(layout.tensors.size());
    append_layer(config, l, type, layout.tensors);
  }
  layout.layer_begin.push_back(layout.tensors.size());
  for (std::size_t k = 0; k < layout.tensors.size(); ++k) {
    tensor_entry& t = layout.tensors[k];
    t.offset_elements = (layout.total_elements + layout_alignment_elements - 1) / layout_alignment_elements *
                        layout_alignment_elements;
    layout.total_elements = t.offset_elements + t.elements();
    layout.parameter_count += t.elements();
    layout.index.emplace(t.name, k);
  }
  return layout;
}

std::string hf_text_prefix(const model_config& config) {
  return config.is_multimodal_file() ? "model.language_model." : "model.";
}

std::string hf_full_name(const model_config& config, const tensor_entry& entry) {
  return entry.name == "lm_head.weight" ? entry.name : hf_text_prefix(config) + entry.name;
}

int64_t layer_parameter_count(const model_config& config, int layer) {
  if (layer < 0 || static_cast<std::size_t>(layer) >= config.layers.size()) return 0;
  std::vector<tensor_entry> tensors;
  append_layer(config, layer, dtype::float32, tensors);
  return sum_elements(tensors);
}

int64_t kv_cache_bytes_per_token(const model_config& config, dtype type) {
  int64_t elements = 0;
  for (const layer_config& layer : config.layers) {
    if (!layer.is_kv_shared) elements += 2 * layer.num_key_value_heads * layer.head_dim;
  }
  return elements * static_cast<int64_t>(size_of(type));
}

}  // namespace tandem::gpu
