// Model lookup (path, preset, Hugging Face cache), parsing, and the facts the planner uses.
#include "tools/cli/model_resolution.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "gpu/model/layout.h"

namespace tandem::cli {
namespace {

namespace fs = std::filesystem;

bool has_config(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / "config.json", ec);
}

/// $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub.
fs::path hf_cache() {
  if (const char* c = std::getenv("HF_HUB_CACHE")) return c;
  if (const char* h = std::getenv("HF_HOME")) return fs::path(h) / "hub";
  if (const char* home = std::getenv("HOME")) return fs::path(home) / ".cache" / "huggingface" / "hub";
  return {};
}

/// The snapshot of `org/name` that refs/main names, else the only snapshot.
std::optional<fs::path> hf_snapshot(const std::string& name) {
  const fs::path cache = hf_cache();
  if (cache.empty() || name.find('/') == std::string::npos) return std::nullopt;
  const fs::path repo = cache / ("models--" + name.substr(0, name.find('/')) + "--" + name.substr(name.find('/') + 1));
  std::error_code ec;
  if (!fs::is_directory(repo / "snapshots", ec)) return std::nullopt;
  std::ifstream ref(repo / "refs" / "main");
  std::string commit;
  if (ref && std::getline(ref, commit) && has_config(repo / "snapshots" / commit)) return repo / "snapshots" / commit;
  std::vector<fs::path> snaps;
  for (const auto& e : fs::directory_iterator(repo / "snapshots", ec))
    if (has_config(e.path())) snaps.push_back(e.path());
  if (snaps.size() == 1) return snaps[0];
  return std::nullopt;
}

std::string presets() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(config_dir() / "models", ec))
    if (has_config(e.path())) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

/// Where a key was set; the recipe's first line for a schema default.
config::source_location where(const config::resolved_recipe& r, const std::string& key) {
  const auto& o = r.origin(key);
  return o.is_default() ? config::source_location{r.file, 1, 1, 0} : o;
}

std::optional<fs::path> find_model(const std::string& name, const std::string& recipe_file) {
  const fs::path p(name);
  if (has_config(p)) return p;
  if (p.filename() == "config.json" && fs::is_regular_file(p)) return p.parent_path();
  if (p.is_relative()) {
    const fs::path beside = fs::path(recipe_file).parent_path() / p;
    if (has_config(beside)) return beside.lexically_normal();
  }
  if (name.find('/') == std::string::npos && has_config(config_dir() / "models" / name))
    return config_dir() / "models" / name;
  return hf_snapshot(name);
}

}  // namespace

fs::path config_dir() {
  if (const char* d = std::getenv("TANDEM_CONFIG_DIR")) return d;
  // Beside the binary: a bundle's bin/../configs, or build/../configs of a checkout's build tree.
  std::error_code ec;
  const fs::path beside = fs::read_symlink("/proc/self/exe", ec).parent_path().parent_path() / "configs";
  if (!ec && fs::is_directory(beside / "models", ec)) return beside;
  return fs::path(TANDEM_SOURCE_DIR) / "configs";
}

std::optional<fs::path> find_model_directory(const std::string& name, std::string& problem) {
  auto dir = find_model(name, "");
  if (!dir) {
    std::error_code ec;
    problem = fs::is_directory(name, ec)
                  ? name + ": no config.json in this directory"
                  : "'" + name + "' is not a directory with a config.json, a preset in " + (config_dir() / "models").string() +
                        " (" + presets() + "), or a model in the Hugging Face cache (" + hf_cache().string() + ")";
  }
  return dir;
}

std::optional<gpu::checkpoint> open_model_option(const std::string& command, const std::string& name, gpu::dtype type,
                                                 std::ostream& err) {
  std::string problem;
  const auto dir = find_model_directory(name, problem);
  if (!dir) {
    err << "tandem " << command << ": " << problem << "\n";
    return std::nullopt;
  }
  auto c = gpu::open_checkpoint(*dir, type);
  if (!c) {
    err << "tandem " << command << ": " << c.error().message() << "\n";
    return std::nullopt;
  }
  return std::move(*c);
}

topology::model_facts facts_of(const gpu::model_config& c, const std::string& name) {
  topology::model_facts f;
  f.name = name;
  f.model_type = std::string(gpu::to_string(c.model_type));
  f.num_layers = c.num_hidden_layers;
  f.hidden_size = c.hidden_size;
  f.vocab_size = c.vocab_size;
  f.max_position_embeddings = c.max_position_embeddings;
  const gpu::model_layout layout = gpu::build_layout(c, gpu::dtype::bfloat16);
  f.parameters = layout.parameter_count;
  f.largest_gathered_unit = c.vocab_size * c.hidden_size;
  if (c.hidden_size_per_layer_input > 0)
    f.largest_gathered_unit = std::max(f.largest_gathered_unit,
                                       c.vocab_size_per_layer_input * c.num_hidden_layers * c.hidden_size_per_layer_input);
  f.sliding_window = c.sliding_window;
  const std::int64_t H = c.hidden_size, P = c.hidden_size_per_layer_input;
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const auto& L = c.layers[static_cast<std::size_t>(l)];
    f.largest_gathered_unit = std::max(f.largest_gathered_unit, gpu::layer_parameter_count(c, l));
    if (!L.is_kv_shared) {
      const std::int64_t kv = 2 * L.num_key_value_heads * L.head_dim;
      (L.type == gpu::layer_type::full ? f.kv_elements_per_token_full : f.kv_elements_per_token_sliding) += kv;
    }
    // Saved for backward without recompute: norm inputs and outputs and residual sums (6H), q and
    // the attention output, raw and normed K/V of store-owning layers, the MLP's gate, up and
    // product, the MoE branch (router probabilities, per-slot expert activations, two norms) and
    // the per-layer-input gate.
    std::int64_t layer = 6 * H + 2 * c.num_attention_heads * L.head_dim + 3 * L.intermediate_size;
    if (!L.is_kv_shared) layer += 4 * L.num_key_value_heads * L.head_dim;
    if (c.enable_moe_block) layer += c.num_experts + c.top_k_experts * 3 * c.moe_intermediate_size + 2 * H;
    if (P > 0) layer += 3 * P;
    f.saved_activations_none += layer;
    f.saved_activations_selective += 6 * H + c.num_attention_heads * L.head_dim + (P > 0 ? P : 0);
    f.saved_activations_full += H;
    f.layer_working_activations = std::max(f.layer_working_activations, layer);
  }
  return f;
}

std::optional<resolved_model> resolve_model(const config::resolved_recipe& r, config::config_errors& errors) {
  const std::string& name = r.config.policy.model_name;
  const auto dir = find_model(name, r.file);
  if (!dir) {
    errors.push_back({where(r, "policy.model_name"), "policy.model_name",
                      "'" + name + "' is not a directory with a config.json, a preset in " +
                          (config_dir() / "models").string() + " (" + presets() +
                          "), or a model in the Hugging Face cache (" + hf_cache().string() + ")"});
    return std::nullopt;
  }
  auto parsed = gpu::load_model_config(*dir);
  if (!parsed) {
    errors.push_back({where(r, "policy.model_name"), "policy.model_name", parsed.error().message()});
    return std::nullopt;
  }
  resolved_model m{*dir, std::move(*parsed), {}};
  m.facts = facts_of(m.config, name);
  const auto total = r.config.policy.max_total_sequence_length;
  if (total > m.config.max_position_embeddings)
    errors.push_back({where(r, "policy.max_total_sequence_length"), "policy.max_total_sequence_length",
                      std::to_string(total) + " exceeds the model's max_position_embeddings (" +
                          std::to_string(m.config.max_position_embeddings) + ")"});
  if (!errors.empty()) return std::nullopt;
  return m;
}

}  // namespace tandem::cli
