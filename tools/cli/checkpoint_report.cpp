// Rendering of an opened checkpoint for `tandem inspect`.
#include "tools/cli/checkpoint_report.h"

#include <cstdio>
#include <string>

#include "gpu/model/json_text.h"

namespace tandem::cli {
namespace {

using json = nlohmann::json;
namespace tg = tandem::gpu;

json rope_json(const tg::rope_config& r) {
  json j{{"rope_type", std::string(tg::to_string(r.kind))}, {"rope_theta", r.theta}};
  if (r.kind == tg::rope_kind::proportional) {
    j["partial_rotary_factor"] = r.partial_rotary_factor;
    j["factor"] = r.factor;
  }
  return j;
}

// The file tensor behind planned tensor `p`.
const tg::st_tensor& file_tensor(const tg::checkpoint& c, const tg::planned_tensor& p) { return *c.files->find(p.name)->tensor; }

std::string file_name(const tg::checkpoint& c, const tg::planned_tensor& p) {
  return c.files->file_of(*c.files->find(p.name)).path().filename().string();
}

std::string weights_kind_name(const tg::checkpoint& c) {
  if (!c.files) return "none";
  return c.files->sharded() ? "sharded" : "single";
}

}  // namespace

json config_json(const tg::model_config& c) {
  json layers = json::array();
  for (std::size_t l = 0; l < c.layers.size(); ++l) {
    const tg::layer_config& L = c.layers[l];
    layers.push_back({{"layer", l},
                      {"type", std::string(tg::to_string(L.type))},
                      {"head_dim", L.head_dim},
                      {"num_key_value_heads", L.num_key_value_heads},
                      {"k_eq_v", L.k_eq_v},
                      {"kv_shared", L.is_kv_shared},
                      {"kv_source_layer", L.kv_source_layer},
                      {"kv_store", L.is_kv_store},
                      {"intermediate_size", L.intermediate_size}});
  }
  json j{{"model_type", std::string(tg::to_string(c.model_type))},
         {"architecture", c.architecture},
         {"vocab_size", c.vocab_size},
         {"hidden_size", c.hidden_size},
         {"num_hidden_layers", c.num_hidden_layers},
         {"intermediate_size", c.intermediate_size},
         {"num_attention_heads", c.num_attention_heads},
         {"num_key_value_heads", c.num_key_value_heads},
         {"head_dim", c.head_dim},
         {"rms_norm_eps", c.rms_norm_eps},
         {"rope_sliding", rope_json(c.rope_sliding)},
         {"rope_full", rope_json(c.rope_full)},
         {"sliding_window", c.sliding_window},
         {"final_logit_softcapping", c.final_logit_softcapping ? json(*c.final_logit_softcapping) : json()},
         {"hidden_size_per_layer_input", c.hidden_size_per_layer_input},
         {"vocab_size_per_layer_input", c.vocab_size_per_layer_input},
         {"attention_k_eq_v", c.attention_k_eq_v},
         {"num_kv_shared_layers", c.num_kv_shared_layers},
         {"enable_moe_block", c.enable_moe_block},
         {"num_experts", c.num_experts},
         {"top_k_experts", c.top_k_experts},
         {"moe_intermediate_size", c.moe_intermediate_size},
         {"use_double_wide_mlp", c.use_double_wide_mlp},
         {"tie_word_embeddings", c.tie_word_embeddings},
         {"pad_token_id", c.pad_token_id ? json(*c.pad_token_id) : json()},
         {"bos_token_id", c.bos_token_id ? json(*c.bos_token_id) : json()},
         {"eos_token_ids", c.eos_token_ids},
         {"max_position_embeddings", c.max_position_embeddings},
         {"hidden_activation", c.hidden_activation},
         {"use_bidirectional_attention", c.use_bidirectional_attention.empty() ? json() : json(c.use_bidirectional_attention)},
         {"dtype", c.torch_dtype ? json(std::string(tg::to_string(*c.torch_dtype))) : json()},
         {"layers", layers}};
  return j;
}

json checkpoint_json(const tg::checkpoint& c) {
  json text = json::array(), unused = json::array(), skipped = json::array(), shards = json::array();
  if (c.files) {
    for (const tg::st_file& f : c.files->shards()) shards.push_back({{"file", f.path().filename().string()}, {"bytes", f.file_bytes()}});
    for (const tg::planned_tensor& p : c.plan.tensors) {
      const tg::st_tensor& t = file_tensor(c, p);
      if (p.role == tg::tensor_role::text) {
        const tg::tensor_entry& e = c.layout.tensors[p.layout_index];
        text.push_back({{"name", p.name}, {"dtype", std::string(tg::to_string(t.type))}, {"shape", t.shape},
                        {"offset", e.offset_elements}, {"bytes", t.bytes()}, {"file", file_name(c, p)}});
      } else if (p.role == tg::tensor_role::unused_kv) {
        unused.push_back({{"name", p.name}, {"dtype", std::string(tg::to_string(t.type))}, {"shape", t.shape}, {"bytes", t.bytes()}});
      }
    }
    for (const tg::skipped_group& g : c.report.skipped) skipped.push_back({{"prefix", g.prefix}, {"tensors", g.tensors}, {"bytes", g.bytes}});
  } else {
    for (const tg::tensor_entry& e : c.layout.tensors)
      text.push_back({{"name", tg::hf_full_name(c.config, e)}, {"dtype", nullptr}, {"shape", e.shape}, {"offset", e.offset_elements}});
  }
  return json{{"directory", c.directory.string()},
              {"architecture", c.config.architecture},
              {"model_type", std::string(tg::to_string(c.config.model_type))},
              {"text_prefix", tg::hf_text_prefix(c.config)},
              {"config", config_json(c.config)},
              {"weights", {{"kind", weights_kind_name(c)},
                           {"manifest", c.files ? json(c.files->manifest().filename().string()) : json()},
                           {"shards", shards},
                           {"bytes", c.files ? c.files->total_bytes() : 0}}},
              {"layout", {{"dtype", std::string(tg::to_string(c.layout.tensors.front().type))},
                          {"tensors", c.layout.tensors.size()},
                          {"parameters", c.layout.parameter_count},
                          {"slab_elements", c.layout.total_elements}}},
              {"text_tensors", text},
              {"unused_kv_tensors", unused},
              {"skipped", skipped},
              {"tied_lm_head_in_file", c.report.tied_head_present}};
}

void print_checkpoint(const tg::checkpoint& c, std::ostream& out) {
  const tg::model_config& m = c.config;
  out << "checkpoint    " << c.directory.string() << "\n";
  out << "architecture  " << m.architecture << " (model_type " << tg::to_string(m.model_type) << ", text prefix '"
      << tg::hf_text_prefix(m) << "')\n";
  int full = 0;
  for (const auto& L : m.layers) full += L.type == tg::layer_type::full;
  out << "config        vocab " << m.vocab_size << ", hidden " << m.hidden_size << ", " << m.num_hidden_layers << " layers ("
      << m.num_hidden_layers - full << " sliding, window " << m.sliding_window << "; " << full << " full), "
      << m.num_attention_heads << " heads, head_dim " << m.head_dim << "\n";
  out << "              per-layer input " << m.hidden_size_per_layer_input << ", KV-shared layers " << m.num_kv_shared_layers
      << ", k_eq_v " << (m.attention_k_eq_v ? "yes" : "no") << ", MoE "
      << (m.enable_moe_block ? std::to_string(m.num_experts) + " experts, top " + std::to_string(m.top_k_experts) +
                                   ", width " + std::to_string(m.moe_intermediate_size)
                             : std::string("no"))
      << ", double-wide MLP " << (m.use_double_wide_mlp ? "yes" : "no") << ", tied embeddings "
      << (m.tie_word_embeddings ? "yes" : "no") << ", softcap "
      << (m.final_logit_softcapping ? json(*m.final_logit_softcapping).dump() : std::string("none")) << "\n";
  out << "layers        layer  type     head_dim  kv_heads  mlp     kv\n";
  for (std::size_t l = 0; l < m.layers.size(); ++l) {
    const auto& L = m.layers[l];
    char line[160];
    std::snprintf(line, sizeof line, "              %-5zu  %-7s  %-8lld  %-8lld  %-6lld  %s\n", l,
                  L.type == tg::layer_type::full ? "full" : "sliding", static_cast<long long>(L.head_dim),
                  static_cast<long long>(L.num_key_value_heads), static_cast<long long>(L.intermediate_size),
                  L.is_kv_shared ? ("shared from " + std::to_string(L.kv_source_layer)).c_str()
                  : L.is_kv_store ? (L.k_eq_v ? "own, k=v, store" : "own, store")
                  : L.k_eq_v      ? "own, k=v"
                                  : "own");
    out << line;
  }
  if (!c.files) {
    out << "weights       none (a config-only directory)\n";
    out << "text tensors  " << c.layout.tensors.size() << " in the layout (" << c.layout.parameter_count << " parameters)\n";
    for (const tg::tensor_entry& e : c.layout.tensors)
      out << "  " << tg::hf_full_name(m, e) << "  " << tg::shape_string(e.shape) << "  offset " << e.offset_elements << "\n";
    return;
  }
  out << "weights       " << c.files->shards().size() << (c.files->sharded() ? " shards" : " file") << " ("
      << c.files->manifest().filename().string() << "), " << tg::format_bytes(c.files->total_bytes()) << "\n";
  out << "text tensors  " << c.report.text_tensors << " (" << tg::format_bytes(c.report.text_bytes) << " as stored), "
      << c.layout.parameter_count << " parameters\n";
  std::size_t width = 0;
  for (const auto& p : c.plan.tensors)
    if (p.role == tg::tensor_role::text) width = std::max(width, p.name.size());
  for (const tg::planned_tensor& p : c.plan.tensors) {
    if (p.role != tg::tensor_role::text) continue;
    const tg::st_tensor& t = file_tensor(c, p);
    std::string name = p.name;
    name.resize(width, ' ');
    out << "  " << name << "  " << tg::to_string(t.type) << "  " << tg::shape_string(t.shape) << "  offset "
        << c.layout.tensors[p.layout_index].offset_elements << "\n";
  }
  if (c.report.unused_kv_tensors > 0)
    out << "ignored       " << c.report.unused_kv_tensors << " unused K/V tensors of KV-shared layers ("
        << tg::format_bytes(c.report.unused_kv_bytes) << "), carried through on save\n";
  if (!c.report.skipped.empty()) out << c.report.skipped_line() << "\n";
  out << "lm_head       " << (!m.tie_word_embeddings ? "untied (a text tensor)"
                              : c.report.tied_head_present ? "tied; lm_head.weight in the file must equal the embedding"
                                                           : "tied to the embedding")
      << "\n";
}

}  // namespace tandem::cli
