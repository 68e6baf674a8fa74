// Small Hugging Face checkpoint directories for tests: a config.json (a preset's, or a preset's
// text config wrapped as a gemma4 / gemma4_unified multimodal file) and tensors with seeded random
// values, written as one model.safetensors or as shards with an index.
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gpu/core/convert.h"
#include "gpu/model/checkpoint_index.h"
#include "gpu/model/config.h"
#include "gpu/model/layout.h"
#include "gpu/model/safetensors_writer.h"

namespace tandem::test {

enum class wrapper { text_only, multimodal, unified };

/// The config.json text of preset `preset` (configs/models/), as is or wrapped.
inline std::string preset_config(const std::string& preset, wrapper w = wrapper::text_only) {
  std::ifstream in(std::filesystem::path(TANDEM_SOURCE_DIR) / "configs/models" / preset / "config.json");
  std::stringstream text;
  text << in.rdbuf();
  if (w == wrapper::text_only) return text.str();
  nlohmann::json inner = nlohmann::json::parse(text.str());
  inner.erase("architectures");
  nlohmann::json top;
  if (w == wrapper::multimodal) {
    inner["model_type"] = "gemma4_text";
    top = {{"architectures", {"Gemma4ForConditionalGeneration"}}, {"model_type", "gemma4"}, {"text_config", inner}};
  } else {
    for (const char* k : {"hidden_size_per_layer_input", "vocab_size_per_layer_input", "enable_moe_block", "num_experts",
                          "top_k_experts", "moe_intermediate_size"})
      inner.erase(k);
    inner["model_type"] = "gemma4_unified_text";
    top = {{"architectures", {"Gemma4UnifiedForConditionalGeneration"}}, {"model_type", "gemma4_unified"}, {"text_config", inner}};
  }
  return top.dump(2);
}

/// Tensors to write, with their bytes.
class checkpoint_builder {
 public:
  struct tensor {
    gpu::st_dtype type;
    std::vector<std::int64_t> shape;
    std::vector<std::byte> data;
  };

  explicit checkpoint_builder(std::filesystem::path dir) : dir_(std::move(dir)) {}

  const std::filesystem::path& dir() const { return dir_; }
  std::map<std::string, tensor>& tensors() { return tensors_; }
  std::vector<std::string>& order() { return order_; }

  void set_config(const std::string& text) { write_file("config.json", text); }
  void write_file(const std::string& name, const std::string& text) const {
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ / name, std::ios::binary) << text;
  }

  void add(const std::string& name, gpu::st_dtype type, std::vector<std::int64_t> shape, std::vector<std::byte> data) {
    if (!tensors_.count(name)) order_.push_back(name);
    tensors_[name] = tensor{type, std::move(shape), std::move(data)};
  }

  /// A float tensor of seeded random values in [-1, 1), stored as `type`.
  void add_random(const std::string& name, gpu::dtype type, const std::vector<std::int64_t>& shape, std::uint32_t seed) {
    std::int64_t n = 1;
    for (auto e : shape) n *= e;
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> values(static_cast<std::size_t>(n));
    for (float& v : values) v = dist(rng);
    std::vector<std::byte> data(static_cast<std::size_t>(n) * gpu::size_of(type));
    gpu::convert_elements(values.data(), gpu::dtype::float32, data.data(), type, n);
    add(name, gpu::st_dtype_of(type), shape, std::move(data));
  }

  /// Every tensor of `config`'s layout under its Hugging Face name (tied lm_head absent).
  void add_text_stack(const gpu::model_config& config, gpu::dtype type, std::uint32_t seed = 1) {
    const gpu::model_layout layout = gpu::build_layout(config, type);
    for (const auto& e : layout.tensors) add_random(gpu::hf_full_name(config, e), type, e.shape, seed++);
  }

  void remove(const std::string& name) {
    tensors_.erase(name);
    order_.erase(std::remove(order_.begin(), order_.end(), name), order_.end());
  }

  /// Writes model.safetensors, or shards of at most `shard_bytes` with an index.
  void write(std::int64_t shard_bytes = 0) const {
    std::filesystem::create_directories(dir_);
    std::vector<std::vector<gpu::st_write_item>> shards(1);
    std::int64_t size = 0;
    for (const std::string& name : order_) {
      const tensor& t = tensors_.at(name);
      gpu::st_write_item item{name, t.type, t.shape, [&t](std::int64_t at, std::span<std::byte> out) {
                                std::memcpy(out.data(), t.data.data() + at, out.size());
                                return gpu::status::ok();
                              }};
      if (shard_bytes > 0 && !shards.back().empty() && size + item.bytes() > shard_bytes) {
        shards.emplace_back();
        size = 0;
      }
      size += item.bytes();
      shards.back().push_back(std::move(item));
    }
    if (shard_bytes <= 0) {
      check(gpu::write_st_file(dir_ / gpu::single_file_name, shards[0], {{"format", "pt"}}));
      return;
    }
    nlohmann::json map = nlohmann::json::object();
    for (std::size_t i = 0; i < shards.size(); ++i) {
      const std::string file = "model-" + std::to_string(i + 1) + "-of-" + std::to_string(shards.size()) + ".safetensors";
      check(gpu::write_st_file(dir_ / file, shards[i], {{"format", "pt"}}));
      for (const auto& item : shards[i]) map[item.name] = file;
    }
    write_file(std::string(gpu::index_file_name), nlohmann::json{{"metadata", {{"total_size", 0}}}, {"weight_map", map}}.dump(2));
  }

 private:
  static void check(const gpu::status& s) {
    if (!s) throw std::runtime_error("checkpoint_builder: " + s.message());
  }

  std::filesystem::path dir_;
  std::map<std::string, tensor> tensors_;
  std::vector<std::string> order_;
};

}  // namespace tandem::test
