// Gemma 4 text configuration: every field of a Hugging Face config.json that changes the math of
// the text stack, with the class defaults and __post_init__ derivations already applied
// (docs/gemma4.md sections 1 and 2.4.1), resolved per layer.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpu/core/dtype.h"
#include "gpu/core/status.h"
#include "gpu/ops/rope.h"

namespace tandem::gpu {

/// The model_type at the top of a config.json; it decides where the text fields live and the
/// Hugging Face name prefix of the text weights.
enum class config_model_type {
  gemma4,               ///< Gemma4ForConditionalGeneration: text fields under "text_config"
  gemma4_text,          ///< text-only Gemma4ForCausalLM save: text fields at the top level
  gemma4_unified,       ///< Gemma4UnifiedForConditionalGeneration (12B): under "text_config"
  gemma4_unified_text,  ///< text-only unified save: text fields at the top level
};

/// Attention kind of one decoder layer ("sliding_attention" / "full_attention" in the file).
enum class layer_type { sliding, full };

/// RoPE variant and settings of one layer type (one inv_freq table each): the op's own parameter
/// struct, so the model hands its config straight to ops::rope_inv_freq. "default" in the file is
/// rope_kind::standard; "proportional" rotates only the first R = int(partial_rotary_factor * d // 2)
/// of d/2 frequencies (denominator d).
using rope_kind = ops::rope_kind;
using rope_config = ops::rope_parameters;

/// Everything that differs between decoder layers, resolved from layer_types, the flat
/// global_* keys or per_layer_config, KV sharing and the double-wide MLP.
struct layer_config {
  layer_type type = layer_type::sliding;  ///< sliding-window or full (global) attention
  int64_t head_dim = 0;                   ///< d of this layer: d_s on sliding, d_f on full layers
  int64_t num_key_value_heads = 0;        ///< kv_l, KV heads of this layer (GQA group count)
  bool k_eq_v = false;        ///< full layer with attention_k_eq_v: no v_proj, V from the K proj
  bool is_kv_shared = false;  ///< l >= F: no K/V projections, reads kv_source_layer's K/V
  int kv_source_layer = 0;    ///< layer whose K/V this layer attends to: itself unless shared
  bool is_kv_store = false;   ///< non-shared layer whose K/V at least one shared layer reads
  int64_t intermediate_size = 0;  ///< I_l, dense MLP width: 2*I on shared layers if double-wide

  bool operator==(const layer_config&) const = default;
};

/// A parsed and derived Gemma 4 text configuration. Parse with parse_model_config or
/// load_model_config; a value built by hand must keep `layers` consistent with the scalars.
struct model_config {
  config_model_type model_type = config_model_type::gemma4_text;  ///< model_type of the file
  std::string architecture = "Gemma4ForCausalLM";  ///< "architectures"[0], the model_type's class if absent
  int64_t vocab_size = 262144;       ///< V, rows of embed_tokens (and the tied lm_head)
  int64_t hidden_size = 2304;        ///< H, width of the residual stream
  int num_hidden_layers = 30;        ///< L, decoder layers
  int64_t intermediate_size = 9216;  ///< I, dense MLP width before double-wide doubling
  int64_t num_attention_heads = 8;   ///< nh, query heads on every layer
  int64_t num_key_value_heads = 4;   ///< kv, the global KV head count (sliding layers)
  int64_t head_dim = 256;            ///< d_s, the global head dim (sliding layers)
  std::vector<layer_config> layers;  ///< per-layer resolution, size num_hidden_layers
  double rms_norm_eps = 1e-6;        ///< epsilon of every RMSNorm
  rope_config rope_sliding;          ///< RoPE of sliding layers (default: "default", 1e4)
  rope_config rope_full;             ///< RoPE of full layers (default: proportional .25, 1e6)
  int64_t sliding_window = 512;      ///< W, keys a sliding layer sees (q-W+1 .. q)
  std::optional<double> final_logit_softcapping;  ///< c in c*tanh(logits/c), none if absent
  int64_t hidden_size_per_layer_input = 256;      ///< P, per-layer embedding width, 0 = no PLE
  int64_t vocab_size_per_layer_input = 262144;    ///< V_ple, rows of the PLE table (0 if P = 0)
  bool attention_k_eq_v = false;                  ///< full layers take V from the K projection
  int num_kv_shared_layers = 0;                   ///< the last N layers reuse a store layer's K/V
  bool enable_moe_block = false;      ///< router + experts beside the dense MLP on every layer
  int64_t num_experts = 0;            ///< E, experts per MoE block (0 when MoE is off)
  int64_t top_k_experts = 0;          ///< K, experts routed per token (0 when MoE is off)
  int64_t moe_intermediate_size = 0;  ///< Im, expert MLP width (0 when MoE is off)
  bool use_double_wide_mlp = false;   ///< dense MLP width 2*I on KV-shared layers
  bool tie_word_embeddings = true;    ///< lm_head.weight is embed_tokens.weight
  std::optional<int64_t> pad_token_id = 0;   ///< padding_idx of both embeddings (zero-grad row)
  std::optional<int64_t> bos_token_id = 2;   ///< beginning-of-sequence token
  /// End-of-sequence token(s): config.json's, then those of generation_config.json beside it
  /// that it lacks (load_model_config of a directory; Gemma 4's generation config adds <turn|> and
  /// <|tool_response>), as a generator that reads both stops at either.
  std::vector<int64_t> eos_token_ids{1};
  int64_t max_position_embeddings = 131072;  ///< longest supported position (RoPE unaffected)
  std::string hidden_activation = "gelu_pytorch_tanh";  ///< MLP/expert/PLE-gate activation
  std::string use_bidirectional_attention;  ///< "" (null) or "vision"; no effect on text-only
  std::optional<dtype> torch_dtype;         ///< "dtype" / "torch_dtype" of the file, if given

  /// F = L - num_kv_shared_layers: layers F..L-1 are KV-shared.
  int first_kv_shared_layer() const { return num_hidden_layers - num_kv_shared_layers; }
  /// RoPE settings of the given layer type.
  const rope_config& rope_for(layer_type t) const {
    return t == layer_type::full ? rope_full : rope_sliding;
  }
  /// True for gemma4 / gemma4_unified files (text fields under "text_config").
  bool is_multimodal_file() const {
    return model_type == config_model_type::gemma4 ||
           model_type == config_model_type::gemma4_unified;
  }

  bool operator==(const model_config&) const = default;
};

/// The one Hugging Face class each model type is read as: Gemma4ForCausalLM (gemma4_text),
/// Gemma4UnifiedForCausalLM (gemma4_unified_text), Gemma4ForConditionalGeneration (gemma4),
/// Gemma4UnifiedForConditionalGeneration (gemma4_unified).
std::string_view architecture_of(config_model_type t);

/// File spelling of a model type ("gemma4_unified_text"), layer type ("full_attention") or RoPE
/// kind ("proportional").
std::string_view to_string(config_model_type t);
std::string_view to_string(layer_type t);
std::string_view to_string(rope_kind k);

/// Parses config.json text (strict JSON: a duplicate key is an error). `source_name` (usually the path) starts every error message, which
/// then names the JSON key ("x/config.json: text_config.hidden_size: expected a positive integer,
/// got -3") or the line and column of a syntax error. Never throws.
result<model_config> parse_model_config(std::string_view json_text, const std::string& source_name);

/// Reads and parses `path`: a config.json file or a directory holding one. A missing file is
/// not_found, an unreadable one io_error. Never throws.
/// `path`: a checkpoint directory (its config.json, and generation_config.json's eos ids when the
/// file is there) or a config file. A malformed generation_config.json is an error naming it.
result<model_config> load_model_config(const std::filesystem::path& path);

}  // namespace tandem::gpu
