// CPU generation throughput: tokens/s of the Gemma 4 generate engine on the CPU at several batch
// sizes and lengths, on a tiny config and a mid-size one, with the share of step() time spent
// outside the model's ops (scheduling, KV bookkeeping, copies), beside the machine's large-GEMM
// FLOP rate measured in the same run. A figure to read, not a gate. Usage: generate_bench [--quick]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "gpu/core/host_buffer.h"
#include "gpu/engine/gemma4_generate_engine.h"
#include "gpu/model/layout.h"
#include "gpu/model/safetensors_format.h"
#include "gpu/model/safetensors_writer.h"
#include "gpu/ops/cpu/gemm.h"

using namespace tandem::gpu;
using clock_type = std::chrono::steady_clock;
namespace fs = std::filesystem;

namespace {

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "generate_bench: %s\n", what.c_str());
  std::exit(1);
}

// The configs: the tiny-all preset (every feature, MoE included) and a mid-size dense one.
std::string preset_text(const std::string& name) {
  std::ifstream in(fs::path(TANDEM_SOURCE_DIR) / "configs/models" / name / "config.json");
  if (!in) die("cannot read the " + name + " preset");
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
const char* mid_config = R"({"model_type": "gemma4_text", "architectures": ["Gemma4ForCausalLM"], "vocab_size": 16384,
  "hidden_size": 512, "num_hidden_layers": 8, "intermediate_size": 2048, "num_attention_heads": 8, "num_key_value_heads": 2,
  "head_dim": 64, "global_head_dim": 128, "hidden_size_per_layer_input": 64, "vocab_size_per_layer_input": 16384,
  "num_kv_shared_layers": 2, "sliding_window": 128, "final_logit_softcapping": 30.0})";

/// A checkpoint directory of random weights (norms at 1) for `config_json`.
fs::path write_model(const fs::path& dir, const std::string& config_json) {
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << config_json;
  auto c = parse_model_config(config_json, "config.json");
  if (!c) die(c.error().message());
  const model_layout layout = build_layout(*c, dtype::float32);
  std::vector<st_write_item> items;
  for (const tensor_entry& e : layout.tensors) {
    const bool norm = e.shape.size() == 1;
    const std::uint64_t seed = std::hash<std::string>{}(e.name);
    items.push_back({hf_full_name(*c, e), st_dtype::f32, e.shape, [norm, seed](std::int64_t at, std::span<std::byte> out) {
                       std::mt19937 rng(static_cast<std::uint32_t>(seed + static_cast<std::uint64_t>(at)));
                       std::normal_distribution<float> normal(0, 0.02f);
                       for (std::size_t i = 0; i + 4 <= out.size(); i += 4) {
                         const float v = norm ? 1.0f : normal(rng);
                         std::memcpy(out.data() + i, &v, 4);
                       }
                       return status::ok();
                     }});
  }
  if (auto s = write_st_file(dir / "model.safetensors", items, {{"format", "pt"}}); !s) die(s.message());
  return dir;
}

void bench(const std::string& name, const fs::path& dir, int batch, int prompt, int new_tokens, double gemm_rate) {
  auto source = open_checkpoint(dir, dtype::float32);
  if (!source) die(source.error().message());
  const double params = static_cast<double>(source->layout.parameter_count);
  gemma4_generate_options o;
  o.max_num_sequences = batch;
  o.kv_cache_bytes = std::int64_t{1} << 30;
  o.share_prompts = false;
  auto engine = gemma4_generate_engine::create(exec_context::cpu(), std::move(*source), o);
  if (!engine) die(engine.error().message());
  std::mt19937 rng(3);
  std::vector<generation_request> requests;
  for (int i = 0; i < batch; ++i) {
    generation_request r;
    r.id = static_cast<std::uint64_t>(i);
    for (int t = 0; t < prompt; ++t) r.prompt.push_back(static_cast<std::int32_t>(rng() % static_cast<std::uint32_t>((*engine)->config().vocab_size)));
    r.max_new_tokens = new_tokens;
    r.sampling = {1.0, 0, 1.0};
    r.rng = {1, 0, 0, static_cast<std::uint32_t>(i), 0, 0};
    requests.push_back(std::move(r));
  }
  if (auto s = (*engine)->submit(requests); !s) die(s.message());
  const auto start = clock_type::now();
  for (;;) {
    auto left = (*engine)->step();
    if (!left) die(left.error().message());
    (void)(*engine)->collect();
    if (*left == 0) break;
  }
  const double seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  const generate_profile& p = (*engine)->profile();
  const double tokens = static_cast<double>(p.tokens);
  // 2 FLOPs per weight per row (every expert of a MoE layer counted, attention over the cache not).
  const double flops = 2.0 * params * static_cast<double>(p.rows);
  std::printf("%-8s batch %3d prompt %4d new %4d: %9.1f generated tok/s %9.1f rows/s  %6.2f GFLOP/s (%4.1f%% of GEMM)  "
              "outside the model %4.1f%% of step time\n",
              name.c_str(), batch, prompt, new_tokens, tokens / seconds, static_cast<double>(p.rows) / seconds, flops / seconds / 1e9,
              100 * flops / seconds / gemm_rate, 100 * (p.step_seconds - p.model_seconds) / p.step_seconds);
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  const std::int64_t n = quick ? 1024 : 2048;
  host_buffer a(dtype::float32, {n, n}), b(dtype::float32, {n, n}), o(dtype::float32, {n, n});
  ops::cpu::gemm<float>(false, false, n, n, n, 1.f, a.data<float>(), n, b.data<float>(), n, 0.f, o.data<float>(), n);
  const auto g0 = clock_type::now();
  ops::cpu::gemm<float>(false, false, n, n, n, 1.f, a.data<float>(), n, b.data<float>(), n, 0.f, o.data<float>(), n);
  const double rate = 2.0 * static_cast<double>(n * n * n) / std::chrono::duration<double>(clock_type::now() - g0).count();
  std::printf("ceiling: float32 GEMM %lld^3 %.2f GFLOP/s (model FLOPs: 2 per weight per row, every expert counted, attention not)\n\n",
              static_cast<long long>(n), rate / 1e9);
  const fs::path root = fs::temp_directory_path() / ("tandem-generate-bench-" + std::to_string(::getpid()));
  const fs::path tiny = write_model(root / "tiny", preset_text("tiny-all")), mid = write_model(root / "mid", mid_config);
  for (const int batch : {1, 8, 32}) bench("tiny", tiny, batch, 32, quick ? 32 : 128, rate);
  for (const int batch : {1, 8}) bench("mid-size", mid, batch, quick ? 64 : 256, quick ? 16 : 64, rate);
  std::error_code ec;
  fs::remove_all(root, ec);
  return 0;
}
