// Binding the layout's tensors to struct fields.
#include "gpu/model/model_weights.h"

#include "gpu/model/slab_views.h"

#include <functional>
#include <string>
#include <utility>

namespace tandem::gpu {
namespace {

// Binds `name` (without the text prefix) when the layout has it, through `view` (the tensor of a
// layout entry, by its index); records the first failure.
class binder {
 public:
  using view_fn = std::function<result<tensor>(const tensor_entry&, std::size_t)>;
  binder(const model_layout& layout, view_fn view) : layout_(layout), view_(std::move(view)) {}

  void operator()(tensor& field, const std::string& name) {
    const tensor_entry* e = layout_.find(name);
    if (!e || !error_.is_ok()) return;
    auto v = view_(*e, static_cast<std::size_t>(e - layout_.tensors.data()));
    if (!v) error_ = status(v.error().code(), "bind_weights: " + name + ": " + v.error().message());
    else field = *v;
  }
  const status& error() const { return error_; }

 private:
  const model_layout& layout_;
  view_fn view_;
  status error_;
};

}  // namespace

result<model_weights> bind_weights(const model_config& config, const model_layout& layout, const slab& s) {
  if (s.bytes() < layout.total_bytes())
    return status(status_code::invalid_argument, "bind_weights: slab " + s.name() + " holds " + std::to_string(s.bytes()) +
                                                     " bytes, the layout needs " + std::to_string(layout.total_bytes()));
  return bind_with(config, layout, [&s](const tensor_entry& e, std::size_t) { return view_in(s, e, e.type); });
}

result<model_weights> bind_weights(const model_config& config, const model_layout& layout,
                                   const std::vector<const std::byte*>& addresses, device dev) {
  if (addresses.size() != layout.tensors.size())
    return status(status_code::invalid_argument, "bind_weights: " + std::to_string(addresses.size()) + " addresses for the " +
                                                     std::to_string(layout.tensors.size()) + " tensors of the layout");
  return bind_with(config, layout, [&](const tensor_entry& e, std::size_t i) -> result<tensor> {
    return tensor::contiguous(const_cast<std::byte*>(addresses[i]), e.type, e.shape, dev);
  });
}

result<model_weights> bind_with(const model_config& config, const model_layout& layout,
                                const std::function<result<tensor>(const tensor_entry&, std::size_t)>& view) {
  binder bind(layout, view);
  model_weights w;
  bind(w.embed_tokens, "embed_tokens.weight");
  bind(w.embed_tokens_per_layer, "embed_tokens_per_layer.weight");
  bind(w.ple_model_projection, "per_layer_model_projection.weight");
  bind(w.ple_projection_norm, "per_layer_projection_norm.weight");
  bind(w.final_norm, "norm.weight");
  bind(w.lm_head, "lm_head.weight");
  if (config.tie_word_embeddings) w.lm_head = w.embed_tokens;
  w.layers.resize(static_cast<std::size_t>(config.num_hidden_layers));
  for (int l = 0; l < config.num_hidden_layers; ++l) {
    layer_weights& x = w.layers[static_cast<std::size_t>(l)];
    const std::string p = "layers." + std::to_string(l) + ".";
    bind(x.input_norm, p + "input_layernorm.weight");
    bind(x.q_proj, p + "self_attn.q_proj.weight");
    bind(x.q_norm, p + "self_attn.q_norm.weight");
    bind(x.k_proj, p + "self_attn.k_proj.weight");
    bind(x.k_norm, p + "self_attn.k_norm.weight");
    bind(x.v_proj, p + "self_attn.v_proj.weight");
    bind(x.o_proj, p + "self_attn.o_proj.weight");
    bind(x.post_attention_norm, p + "post_attention_layernorm.weight");
    bind(x.pre_feedforward_norm, p + "pre_feedforward_layernorm.weight");
    bind(x.gate_proj, p + "mlp.gate_proj.weight");
    bind(x.up_proj, p + "mlp.up_proj.weight");
    bind(x.down_proj, p + "mlp.down_proj.weight");
    bind(x.post_feedforward_norm, p + "post_feedforward_layernorm.weight");
    bind(x.post_feedforward_norm_1, p + "post_feedforward_layernorm_1.weight");
    bind(x.router_proj, p + "router.proj.weight");
    bind(x.router_scale, p + "router.scale");
    bind(x.router_per_expert_scale, p + "router.per_expert_scale");
    bind(x.pre_feedforward_norm_2, p + "pre_feedforward_layernorm_2.weight");
    bind(x.experts_gate_up, p + "experts.gate_up_proj");
    bind(x.experts_down, p + "experts.down_proj");
    bind(x.post_feedforward_norm_2, p + "post_feedforward_layernorm_2.weight");
    bind(x.ple_gate, p + "per_layer_input_gate.weight");
    bind(x.ple_projection, p + "per_layer_projection.weight");
    bind(x.ple_post_norm, p + "post_per_layer_input_norm.weight");
    bind(x.layer_scalar, p + "layer_scalar");
  }
  if (!bind.error().is_ok()) return bind.error();
  return w;
}

}  // namespace tandem::gpu
