// Parsing of Gemma 4 config.json files into model_config: typed reads that name every key by its
// path, class defaults per model type, and the derivations of docs/gemma4.md
// §1.2 (layer types, RoPE, full-layer heads), §1.3 (per_layer_config) and §2.4.1 (KV sharing).
#include "gpu/model/config.h"

#include "gpu/model/json_text.h"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>

namespace tandem::gpu {
namespace {

using json = nlohmann::json;

// Thrown inside this file only; parse_model_config turns it back into its status.
struct config_error {
  status error;
};

// Bounds that keep every element count far from int64 overflow.
constexpr int64_t max_dimension = int64_t{1} << 24;
constexpr int64_t max_layers = 4096;
constexpr int64_t no_limit = std::numeric_limits<int64_t>::max();

// A JSON value as it appears in an error message, cut short when long.
std::string describe(const json& v) {
  std::string s = v.dump();
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

// "a positive integer", "a non-negative integer" or "an integer >= min".
std::string integer_kind(int64_t min) {
  if (min == 1) return "a positive integer";
  if (min == 0) return "a non-negative integer";
  return "an integer >= " + std::to_string(min);
}

// Typed reads of one JSON object; errors name the file and the key's full path.
class object_reader {
 public:
  object_reader(const json& object, std::string prefix, const std::string& source)
      : object_(object), prefix_(std::move(prefix)), source_(source) {}

  const std::string& source() const { return source_; }
  std::string path(std::string_view key) const { return prefix_ + std::string(key); }

  /// A reader for the object under `key` (which must be one), keys prefixed "key.".
  object_reader child(std::string_view key, const json& value) const {
    if (!value.is_object()) {
      fail(key, status_code::invalid_argument, "expected an object, got " + describe(value));
    }
    return object_reader(value, path(key) + ".", source_);
  }

  [[noreturn]] void fail(std::string_view key, status_code code, const std::string& what) const {
    throw config_error{status(code, source_ + ": " + path(key) + ": " + what)};
  }

  /// The value of `key`, or nullptr when the key is absent (a JSON null is returned as such).
  const json* get(std::string_view key) const {
    auto it = object_.find(std::string(key));
    return it == object_.end() ? nullptr : &*it;
  }
  bool has(std::string_view key) const { return get(key) != nullptr; }

  /// An integer in [min, max]; `fallback` when absent; null is an error.
  int64_t integer(std::string_view key, int64_t fallback, int64_t min,
                  int64_t max = max_dimension) const {
    const json* v = get(key);
    return v ? to_integer(key, *v, min, max) : fallback;
  }

  /// An integer in [min, max], or nullopt when absent or null.
  std::optional<int64_t> optional_integer(std::string_view key, int64_t min,
                                          int64_t max = max_dimension) const {
    const json* v = get(key);
    if (!v || v->is_null()) return std::nullopt;
    return to_integer(key, *v, min, max);
  }

  /// An integer that must be present when `why` holds.
  int64_t required_integer(std::string_view key, int64_t min, int64_t max,
                           const std::string& why) const {
    auto v = optional_integer(key, min, max);
    if (!v) fail(key, status_code::invalid_argument, "missing: required when " + why);
    return *v;
  }

  /// A number (> 0 when `positive`, else >= 0); `fallback` when absent; null is an error.
  double number(std::string_view key, double fallback, bool positive) const {
    const json* v = get(key);
    return v ? to_number(key, *v, positive) : fallback;
  }

  /// A number, or nullopt when absent or null.
  std::optional<double> optional_number(std::string_view key, bool positive) const {
    const json* v = get(key);
    if (!v || v->is_null()) return std::nullopt;
    return to_number(key, *v, positive);
  }

  /// true / false; `fallback` when absent; null is an error.
  bool boolean(std::string_view key, bool fallback) const {
    const json* v = get(key);
    if (!v) return fallback;
    if (!v->is_boolean()) {
      fail(key, status_code::invalid_argument, "expected true or false, got " + describe(*v));
    }
    return v->get<bool>();
  }

  /// A string, or nullopt when absent or null.
  std::optional<std::string> optional_string(std::string_view key) const {
    const json* v = get(key);
    if (!v || v->is_null()) return std::nullopt;
    if (!v->is_string()) {
      fail(key, status_code::invalid_argument, "expected a string, got " + describe(*v));
    }
    return v->get<std::string>();
  }

  int64_t to_integer(std::string_view key, const json& v, int64_t min, int64_t max) const {
    const std::string kind = integer_kind(min);
    if (!v.is_number_integer()) {
      fail(key, status_code::invalid_argument, "expected " + kind + ", got " + describe(v));
    }
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(max)) {
      fail(key, status_code::invalid_argument,
           "expected " + kind + " no larger than " + std::to_string(max) + ", got " + describe(v));
    }
    const int64_t x = v.get<int64_t>();
    if (x < min) {
      fail(key, status_code::invalid_argument, "expected " + kind + ", got " + describe(v));
    }
    if (x > max) {
      fail(key, status_code::invalid_argument,
           "expected " + kind + " no larger than " + std::to_string(max) + ", got " + describe(v));
    }
    return x;
  }

  double to_number(std::string_view key, const json& v, bool positive) const {
    const char* kind = positive ? "a positive number" : "a non-negative number";
    if (!v.is_number()) {
      fail(key, status_code::invalid_argument,
           std::string("expected ") + kind + ", got " + describe(v));
    }
    const double x = v.get<double>();
    if (positive ? !(x > 0.0) : !(x >= 0.0)) {
      fail(key, status_code::invalid_argument,
           std::string("expected ") + kind + ", got " + describe(v));
    }
    return x;
  }

 private:
  const json& object_;
  std::string prefix_;
  const std::string& source_;
};

// The 12B family: no PLE, no MoE, other defaults (§1.5).
bool is_unified(config_model_type t) {
  return t == config_model_type::gemma4_unified || t == config_model_type::gemma4_unified_text;
}

std::optional<config_model_type> parse_model_type(std::string_view name) {
  for (auto t : {config_model_type::gemma4, config_model_type::gemma4_text,
                 config_model_type::gemma4_unified, config_model_type::gemma4_unified_text}) {
    if (name == to_string(t)) return t;
  }
  return std::nullopt;
}

// One entry of rope_parameters ({"rope_type": ..., "rope_theta": ..., ...}).
rope_config read_rope(const object_reader& r) {
  rope_config rope;
  const std::string kind = r.optional_string("rope_type").value_or("default");
  if (kind == "proportional") {
    rope.kind = rope_kind::proportional;
  } else if (kind != "default") {
    r.fail("rope_type", status_code::unsupported,
           "RoPE type \"" + kind +
               "\" is not supported (Gemma 4 uses \"default\" and \"proportional\")");
  }
  auto theta = r.optional_number("rope_theta", true);
  if (!theta) r.fail("rope_theta", status_code::invalid_argument, "missing");
  rope.theta = *theta;
  if (rope.kind == rope_kind::proportional) {  // HF's default RoPE ignores both
    rope.partial_rotary_factor = r.number("partial_rotary_factor", 1.0, true);
    if (rope.partial_rotary_factor > 1.0) {
      r.fail("partial_rotary_factor", status_code::invalid_argument,
             "expected a number in (0, 1], got " + describe(*r.get("partial_rotary_factor")));
    }
    rope.factor = r.number("factor", 1.0, true);
  }
  return rope;
}

// rope_parameters: one entry per layer type; defaults (§1.2 step 4) only when the whole key is
// absent or null, or for a type no layer uses.
void read_rope_parameters(const object_reader& t, model_config& c) {
  c.rope_sliding = rope_config{rope_kind::standard, 1e4, 1.0, 1.0};
  c.rope_full = rope_config{rope_kind::proportional, 1e6, 0.25, 1.0};
  const json* v = t.get("rope_parameters");
  if (!v || v->is_null()) return;
  const object_reader rp = t.child("rope_parameters", *v);
  if (rp.has("rope_type") || rp.has("rope_theta")) {
    t.fail("rope_parameters", status_code::invalid_argument,
           "expected one entry per layer type (\"sliding_attention\", \"full_attention\"), got a "
           "single RoPE setting");
  }
  for (layer_type type : {layer_type::sliding, layer_type::full}) {
    const std::string_view name = to_string(type);
    const json* entry = rp.get(name);
    bool used = false;
    for (const layer_config& l : c.layers) used = used || l.type == type;
    if (!entry || entry->is_null()) {
      if (used) {
        rp.fail(name, status_code::invalid_argument,
                "missing: some layers are " + std::string(name));
      }
      continue;
    }
    (type == layer_type::full ? c.rope_full : c.rope_sliding) = read_rope(rp.child(name, *entry));
  }
}

// layer_types, with the 5:1 default (§1.2 step 2) and the last layer forced full (step 3).
void read_layer_types(const object_reader& t, model_config& c) {
  const int n = c.num_hidden_layers;
  c.layers.assign(static_cast<std::size_t>(n), layer_config{});
  const json* v = t.get("layer_types");
  for (int l = 0; l < n; ++l) {
    layer_type type = (l + 1) % 6 == 0 ? layer_type::full : layer_type::sliding;
    if (v && !v->is_null()) {
      if (!v->is_array()) {
        t.fail("layer_types", status_code::invalid_argument,
               "expected a list, got " + describe(*v));
      }
      if (v->size() != static_cast<std::size_t>(n)) {
        t.fail("layer_types", status_code::invalid_argument,
               "has " + std::to_string(v->size()) +
                   " entries, expected num_hidden_layers = " + std::to_string(n));
      }
      const json& e = (*v)[static_cast<std::size_t>(l)];
      if (e == "full_attention") {
        type = layer_type::full;
      } else if (e == "sliding_attention") {
        type = layer_type::sliding;
      } else {
        t.fail("layer_types[" + std::to_string(l) + "]", status_code::invalid_argument,
               "expected \"sliding_attention\" or \"full_attention\", got " + describe(e));
      }
    }
    c.layers[static_cast<std::size_t>(l)].type = type;
  }
  c.layers.back().type = layer_type::full;
}

// An even head dimension (RoPE rotates halves).
int64_t read_head_dim(const object_reader& r, std::string_view key, int64_t fallback) {
  const int64_t d = r.integer(key, fallback, 1);
  if (d % 2 != 0) {
    r.fail(key, status_code::invalid_argument,
           "expected an even head dimension, got " + std::to_string(d));
  }
  return d;
}

// Head dim and KV heads per layer: per_layer_config when present (§1.3), else the flat
// global_head_dim / num_global_key_value_heads keys (§1.2 step 5). Checks GQA divisibility.
void read_attention_shapes(const object_reader& t, model_config& c) {
  std::vector<std::string> kv_key(c.layers.size(), t.path("num_key_value_heads"));
  for (layer_config& l : c.layers) {
    l.head_dim = c.head_dim;
    l.num_key_value_heads = c.num_key_value_heads;
  }
  const json* plc = t.get("per_layer_config");
  if (plc && !plc->is_null()) {
    const object_reader pr = t.child("per_layer_config", *plc);
    for (const auto& [key, value] : plc->items()) {
      const bool digits = !key.empty() && key.size() < 8 &&
                          key.find_first_not_of("0123456789") == std::string::npos;
      const int l = digits ? std::stoi(key) : -1;
      if (l < 0 || l >= c.num_hidden_layers) {
        pr.fail(key, status_code::invalid_argument,
                "expected a layer index below num_hidden_layers = " +
                    std::to_string(c.num_hidden_layers));
      }
      const object_reader lr = pr.child(key, value);
      for (const auto& field : value.items()) {
        if (field.key() != "head_dim" && field.key() != "num_key_value_heads") {
          lr.fail(field.key(), status_code::unsupported,
                  "a per-layer override of this field is not supported");
        }
      }
      layer_config& layer = c.layers[static_cast<std::size_t>(l)];
      layer.head_dim = read_head_dim(lr, "head_dim", layer.head_dim);
      layer.num_key_value_heads = lr.integer("num_key_value_heads", layer.num_key_value_heads, 1);
      if (lr.has("num_key_value_heads")) {
        kv_key[static_cast<std::size_t>(l)] = lr.path("num_key_value_heads");
      }
    }
  } else {
    const int64_t global_head_dim = read_head_dim(t, "global_head_dim", 512);
    const auto global_kv = t.optional_integer("num_global_key_value_heads", 1);
    for (std::size_t l = 0; l < c.layers.size(); ++l) {
      if (c.layers[l].type != layer_type::full) continue;
      c.layers[l].head_dim = global_head_dim;
      if (c.attention_k_eq_v && global_kv) {
        c.layers[l].num_key_value_heads = *global_kv;
        kv_key[l] = t.path("num_global_key_value_heads");
      }
    }
  }
  for (std::size_t l = 0; l < c.layers.size(); ++l) {
    if (c.num_attention_heads % c.layers[l].num_key_value_heads != 0) {
      throw config_error{status(status_code::invalid_argument,
                                t.source() + ": " + kv_key[l] + ": layer " + std::to_string(l) +
                                    " has " + std::to_string(c.layers[l].num_key_value_heads) +
                                    " key-value heads, which do not divide num_attention_heads = " +
                                    std::to_string(c.num_attention_heads))};
    }
  }
}

// KV sharing (§2.4.1): F = L - num_kv_shared_layers; layer l >= F reads the K/V of the last layer
// of its type among 0..F-1; the dense MLP doubles on those layers when use_double_wide_mlp.
void derive_kv_sharing(const object_reader& t, model_config& c) {
  const int first_shared = c.first_kv_shared_layer();
  int store[2] = {-1, -1};  // per layer_type: last non-shared layer of that type
  for (int l = 0; l < first_shared; ++l) {
    store[static_cast<int>(c.layers[static_cast<std::size_t>(l)].type)] = l;
  }
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    layer_config& layer = c.layers[static_cast<std::size_t>(l)];
    layer.k_eq_v = c.attention_k_eq_v && layer.type == layer_type::full;
    layer.is_kv_shared = l >= first_shared;
    layer.kv_source_layer = layer.is_kv_shared ? store[static_cast<int>(layer.type)] : l;
    const bool doubled = c.use_double_wide_mlp && l >= first_shared && first_shared > 0;
    layer.intermediate_size = doubled ? 2 * c.intermediate_size : c.intermediate_size;
    if (!layer.is_kv_shared) continue;
    const std::string where =
        "layer " + std::to_string(l) + " (" + std::string(to_string(layer.type)) + ")";
    if (layer.kv_source_layer < 0) {
      t.fail("num_kv_shared_layers", status_code::invalid_argument,
             where + " is KV-shared but no layer of its type precedes layer " +
                 std::to_string(first_shared));
    }
    layer_config& source = c.layers[static_cast<std::size_t>(layer.kv_source_layer)];
    if (source.head_dim != layer.head_dim ||
        source.num_key_value_heads != layer.num_key_value_heads) {
      t.fail("num_kv_shared_layers", status_code::invalid_argument,
             where + " shares the K/V of layer " + std::to_string(layer.kv_source_layer) +
                 ", which has a different head_dim or num_key_value_heads");
    }
    source.is_kv_store = true;
  }
}

// An eos_token_id: one id, a list of ids, or null (none).
std::vector<int64_t> read_eos(const object_reader& r) {
  const json* v = r.get("eos_token_id");
  if (!v) return {1};
  if (v->is_null()) return {};
  if (!v->is_array()) return {r.to_integer("eos_token_id", *v, 0, no_limit)};
  std::vector<int64_t> ids;
  for (std::size_t i = 0; i < v->size(); ++i) {
    ids.push_back(r.to_integer("eos_token_id[" + std::to_string(i) + "]", (*v)[i], 0, no_limit));
  }
  return ids;
}

// Fields a multimodal file may keep at the top level instead of in text_config: the text
// object wins when it has the key.
const object_reader& owner(const object_reader& text, const object_reader* top,
                           std::string_view key) {
  return text.has(key) || !top ? text : *top;
}

// Settings Gemma 4 never uses; refused rather than silently ignored.
void refuse_unsupported(const object_reader& t, model_config& c) {
  if (t.boolean("attention_bias", false)) {
    t.fail("attention_bias", status_code::unsupported,
           "q/k/v/o biases are not supported (no Gemma 4 checkpoint has them)");
  }
  if (t.number("attention_dropout", 0.0, false) != 0.0) {
    t.fail("attention_dropout", status_code::unsupported, "attention dropout is not supported");
  }
  c.hidden_activation = t.optional_string("hidden_activation").value_or("gelu_pytorch_tanh");
  if (c.hidden_activation != "gelu_pytorch_tanh") {
    t.fail("hidden_activation", status_code::unsupported,
           "activation \"" + c.hidden_activation +
               "\" is not supported (Gemma 4 uses gelu_pytorch_tanh)");
  }
  const bool unified = is_unified(c.model_type);
  const json* bidi = t.get("use_bidirectional_attention");
  c.use_bidirectional_attention =
      bidi ? t.optional_string("use_bidirectional_attention").value_or("")
           : (unified ? "vision" : "");
  if (c.use_bidirectional_attention == "all") {
    t.fail(
        "use_bidirectional_attention", status_code::unsupported,
        "\"all\" (non-causal attention everywhere) is not supported; no published model uses it");
  }
  if (!c.use_bidirectional_attention.empty() && c.use_bidirectional_attention != "vision") {
    t.fail("use_bidirectional_attention", status_code::invalid_argument,
           "expected null, \"vision\" or \"all\", got \"" + c.use_bidirectional_attention + "\"");
  }
}

// Per-layer embeddings and the MoE block; neither exists in unified (12B) configs (§1.5).
void read_ple_and_moe(const object_reader& t, model_config& c) {
  c.hidden_size_per_layer_input = 0;
  c.vocab_size_per_layer_input = 0;
  c.enable_moe_block = false;
  c.num_experts = c.top_k_experts = c.moe_intermediate_size = 0;
  if (is_unified(c.model_type)) return;
  const json* p = t.get("hidden_size_per_layer_input");  // absent: 256; null: 0 (PLE off)
  c.hidden_size_per_layer_input =
      !p             ? 256
      : p->is_null() ? 0
                     : t.to_integer("hidden_size_per_layer_input", *p, 0, max_dimension);
  if (c.hidden_size_per_layer_input > 0) {
    c.vocab_size_per_layer_input = t.integer("vocab_size_per_layer_input", 262144, 1);
  }
  c.enable_moe_block = t.boolean("enable_moe_block", false);
  if (c.enable_moe_block) {
    const std::string why = "enable_moe_block is true";
    c.num_experts = t.required_integer("num_experts", 1, max_dimension, why);
    c.top_k_experts = t.required_integer("top_k_experts", 1, c.num_experts, why);
    c.moe_intermediate_size = t.required_integer("moe_intermediate_size", 1, max_dimension, why);
  }
}

// Every text field of one text-config object; `top` is the enclosing multimodal object, if any.
model_config read_text_config(const object_reader& t, const object_reader* top,
                              config_model_type type) {
  model_config c;
  c.model_type = type;
  const bool unified = is_unified(type);
  c.vocab_size = t.integer("vocab_size", 262144, 1);
  c.hidden_size = t.integer("hidden_size", 2304, 1);
  c.num_hidden_layers = static_cast<int>(t.integer("num_hidden_layers", 30, 1, max_layers));
  c.intermediate_size = t.integer("intermediate_size", 9216, 1);
  c.num_attention_heads = t.integer("num_attention_heads", 8, 1);
  c.num_key_value_heads = t.integer("num_key_value_heads", 4, 1);
  c.head_dim = read_head_dim(t, "head_dim", 256);
  c.rms_norm_eps = t.number("rms_norm_eps", 1e-6, true);
  c.sliding_window = t.integer("sliding_window", unified ? 1024 : 512, 1, no_limit);
  c.max_position_embeddings =
      t.integer("max_position_embeddings", unified ? 262144 : 131072, 1, no_limit);
  c.final_logit_softcapping = t.optional_number("final_logit_softcapping", true);
  c.attention_k_eq_v = t.boolean("attention_k_eq_v", false);
  c.use_double_wide_mlp = t.boolean("use_double_wide_mlp", false);
  c.num_kv_shared_layers =
      static_cast<int>(t.integer("num_kv_shared_layers", 0, 0, c.num_hidden_layers));
  if (c.num_kv_shared_layers == c.num_hidden_layers) {
    t.fail("num_kv_shared_layers", status_code::unsupported,
           "every layer KV-shared (K/V from outside the model, as in an assistant drafter) is not "
           "supported");
  }
  refuse_unsupported(t, c);
  read_ple_and_moe(t, c);
  read_layer_types(t, c);
  read_attention_shapes(t, c);
  read_rope_parameters(t, c);
  derive_kv_sharing(t, c);

  c.tie_word_embeddings = owner(t, top, "tie_word_embeddings").boolean("tie_word_embeddings", true);
  const object_reader& pad = owner(t, top, "pad_token_id");
  c.pad_token_id = pad.has("pad_token_id")
                       ? pad.optional_integer("pad_token_id", 0, c.vocab_size - 1)
                       : std::optional<int64_t>{0};
  const object_reader& bos = owner(t, top, "bos_token_id");
  c.bos_token_id = bos.has("bos_token_id") ? bos.optional_integer("bos_token_id", 0, no_limit)
                                           : std::optional<int64_t>{2};
  c.eos_token_ids = read_eos(owner(t, top, "eos_token_id"));
  for (const object_reader* r : {&t, top}) {  // text object first; "dtype" is HF 5's spelling
    for (const char* key : {"dtype", "torch_dtype"}) {
      if (!r || c.torch_dtype) continue;
      const auto name = r->optional_string(key);
      if (!name) continue;
      c.torch_dtype = parse_dtype(*name);
      if (!c.torch_dtype) {
        r->fail(key, status_code::invalid_argument, "unknown dtype \"" + *name + "\"");
      }
    }
  }
  return c;
}

// "architectures": absent, or a list naming exactly the class the model type is read as. Another
// class (a bare Gemma4TextModel, a classification head) stores other tensors under other names.
std::string read_architecture(const object_reader& top, config_model_type type) {
  const std::string expected(architecture_of(type));
  const json* a = top.get("architectures");
  if (!a || a->is_null()) return expected;
  if (!a->is_array() || a->empty() || !(*a)[0].is_string()) {
    top.fail("architectures", status_code::invalid_argument, "expected a list of class names, got " + describe(*a));
  }
  for (const json& name : *a) {
    if (!name.is_string() || name.get<std::string>() != expected) {
      top.fail("architectures", status_code::unsupported,
               "unsupported architecture " + describe(name) + " for model_type \"" + std::string(to_string(type)) +
                   "\" (tandem reads " + expected + ")");
    }
  }
  return expected;
}

// The whole file: model_type decides whether the text fields are under "text_config".
model_config read_root(const json& root, const std::string& source) {
  if (!root.is_object()) {
    throw config_error{
        status(status_code::invalid_argument,
               source + ": expected a JSON object at the top level, got " + describe(root))};
  }
  const object_reader top(root, "", source);
  const auto name = top.optional_string("model_type");
  if (!name) top.fail("model_type", status_code::invalid_argument, "missing");
  const auto type = parse_model_type(*name);
  if (!type) {
    top.fail("model_type", status_code::unsupported,
             "unsupported model type \"" + *name +
                 "\" (expected gemma4, gemma4_text, gemma4_unified or gemma4_unified_text)");
  }
  const std::string architecture = read_architecture(top, *type);
  if (*type == config_model_type::gemma4_text || *type == config_model_type::gemma4_unified_text) {
    model_config c = read_text_config(top, nullptr, *type);
    c.architecture = architecture;
    return c;
  }
  const json* text = top.get("text_config");
  if (!text || text->is_null()) {
    top.fail("text_config", status_code::invalid_argument, "missing in a " + *name + " file");
  }
  const object_reader t = top.child("text_config", *text);
  const auto expected = *type == config_model_type::gemma4 ? config_model_type::gemma4_text
                                                           : config_model_type::gemma4_unified_text;
  if (auto inner = t.optional_string("model_type"); inner && *inner != to_string(expected)) {
    t.fail("model_type", status_code::invalid_argument,
           "expected \"" + std::string(to_string(expected)) + "\" in a " + *name + " file, got \"" +
               *inner + "\"");
  }
  model_config c = read_text_config(t, &top, *type);
  c.architecture = architecture;
  return c;
}

}  // namespace

std::string_view to_string(config_model_type t) {
  switch (t) {
    case config_model_type::gemma4: return "gemma4";
    case config_model_type::gemma4_text: return "gemma4_text";
    case config_model_type::gemma4_unified: return "gemma4_unified";
    case config_model_type::gemma4_unified_text: return "gemma4_unified_text";
  }
  return "?";
}

std::string_view architecture_of(config_model_type t) {
  switch (t) {
    case config_model_type::gemma4: return "Gemma4ForConditionalGeneration";
    case config_model_type::gemma4_text: return "Gemma4ForCausalLM";
    case config_model_type::gemma4_unified: return "Gemma4UnifiedForConditionalGeneration";
    case config_model_type::gemma4_unified_text: return "Gemma4UnifiedForCausalLM";
  }
  return "?";
}

std::string_view to_string(layer_type t) {
  return t == layer_type::full ? "full_attention" : "sliding_attention";
}

std::string_view to_string(rope_kind k) {
  return k == rope_kind::proportional ? "proportional" : "default";
}

result<model_config> parse_model_config(std::string_view json_text,
                                        const std::string& source_name) {
  try {
    auto root = parse_json_strict(json_text, source_name);
    if (!root) return root.error();
    return read_root(*root, source_name);
  } catch (const config_error& e) {
    return e.error;
  } catch (const std::exception& e) {
    return status(status_code::invalid_argument, source_name + ": " + e.what());
  }
}

namespace {

/// Adds the eos ids of DIR/generation_config.json, when the file is there, to `c`'s (those it
/// lacks, in the file's order).
status add_generation_eos(const std::filesystem::path& dir, model_config& c) {
  const std::filesystem::path file = dir / "generation_config.json";
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) return status::ok();
  auto text = read_text_file(file);
  if (!text) return text.error();
  try {
    auto root = parse_json_strict(*text, file.string());
    if (!root) return root.error();
    if (!root->is_object()) return status(status_code::invalid_argument, file.string() + ": expected a JSON object");
    const std::string name = file.string();  // the reader keeps a reference to it
    const object_reader r(*root, "", name);
    if (!r.has("eos_token_id")) return status::ok();
    for (const int64_t id : read_eos(r))
      if (std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), id) == c.eos_token_ids.end()) c.eos_token_ids.push_back(id);
    return status::ok();
  } catch (const config_error& e) {
    return e.error;
  }
}

}  // namespace

result<model_config> load_model_config(const std::filesystem::path& path) {
  try {
    std::error_code ec;
    const bool directory = std::filesystem::is_directory(path, ec);
    const std::filesystem::path file = directory ? path / "config.json" : path;
    const std::string name = file.string();
    if (!std::filesystem::is_regular_file(file, ec)) {
      const bool missing = !std::filesystem::exists(file, ec);
      return status(missing ? status_code::not_found : status_code::io_error,
                    name + (missing ? ": no such file" : ": not a regular file"));
    }
    auto text = read_text_file(file);
    if (!text) return text.error();
    auto c = parse_model_config(*text, name);
    if (!c || !directory) return c;
    if (status s = add_generation_eos(path, c.value()); !s) return s;
    return c;
  } catch (const std::exception& e) {
    return status(status_code::io_error, path.string() + ": " + e.what());
  }
}

}  // namespace tandem::gpu
