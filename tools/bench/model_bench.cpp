// CPU model throughput: forward and forward+backward tokens/s of the Gemma 4 text stack on the
// tiny configs and one mid-size config, each beside the machine's large-GEMM FLOP rate measured
// in the same run (the model's matrix FLOPs per second as a share of it). A figure to read, not a
// gate. Usage: model_bench [--quick]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "gpu/core/host_buffer.h"
#include "gpu/core/slab.h"
#include "gpu/model/backward.h"
#include "gpu/model/forward.h"
#include "gpu/model/layout.h"
#include "gpu/model/model_flops.h"
#include "gpu/model/slab_views.h"
#include "gpu/ops/cpu/gemm.h"

#include "gpu/core/exec_context.h"

namespace {
// Every op of this file runs on the CPU, on the calling thread.
const tandem::gpu::exec_context ctx = tandem::gpu::exec_context::cpu();
}  // namespace

using namespace tandem::gpu;
using clock_type = std::chrono::steady_clock;

namespace {

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "model_bench: %s\n", what.c_str());
  std::exit(1);
}

void check(const status& s) {
  if (!s) die(s.message());
}

double median_seconds(int reps, const std::function<void()>& f) {
  f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto a = clock_type::now();
    f();
    t.push_back(std::chrono::duration<double>(clock_type::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

model_config preset(const std::string& name) {
  auto c = load_model_config(std::filesystem::path(TANDEM_SOURCE_DIR) / "configs/models" / name);
  if (!c) die(c.error().message());
  return *c;
}

// A mid-size dense model: 8 layers of width 512 with every structural feature but MoE.
model_config mid_size() {
  auto c = parse_model_config(R"({"model_type": "gemma4_text", "vocab_size": 16384, "hidden_size": 512,
    "num_hidden_layers": 8, "intermediate_size": 2048, "num_attention_heads": 8, "num_key_value_heads": 2,
    "head_dim": 64, "global_head_dim": 128, "hidden_size_per_layer_input": 64, "vocab_size_per_layer_input": 16384,
    "num_kv_shared_layers": 2, "sliding_window": 128, "final_logit_softcapping": 30.0})", "mid-size");
  if (!c) die(c.error().message());
  return *c;
}

void bench(const std::string& name, const model_config& c, int sequences, int length, int reps, double gemm_rate) {
  const model_layout layout = build_layout(c, dtype::float32);
  auto params = slab::create("parameters", layout.total_bytes(), device::cpu());
  auto grads = slab::create("gradients", layout.total_bytes(), device::cpu());
  if (!params || !grads) die("cannot allocate the model");
  std::mt19937 rng(1);
  for (const auto& e : layout.tensors) {
    float* p = static_cast<float*>(view_in(*params, e, dtype::float32)->data());
    for (std::int64_t i = 0; i < e.elements(); ++i)
      p[i] = e.shape.size() == 1 ? 1.0f : std::normal_distribution<float>(0, 0.02f)(rng);
  }
  const model_weights w = *bind_weights(c, layout, *params), g = *bind_weights(c, layout, *grads);
  std::vector<std::int32_t> tok, pos, tgt, cu{0};
  for (int s = 0; s < sequences; ++s) {
    for (int t = 0; t < length; ++t) {
      tok.push_back(static_cast<std::int32_t>(rng() % static_cast<std::uint32_t>(c.vocab_size)));
      pos.push_back(t);
    }
    cu.push_back(static_cast<std::int32_t>(tok.size()));
  }
  const auto T = static_cast<std::int64_t>(tok.size());
  tgt.assign(tok.begin() + 1, tok.end());
  tgt.push_back(0);
  const auto ids = host_buffer::of<std::int32_t>({T}, tok), positions = host_buffer::of<std::int32_t>({T}, pos);
  const auto offsets = host_buffer::of<std::int32_t>({static_cast<std::int64_t>(cu.size())}, cu);
  const auto targets = host_buffer::of<std::int32_t>({T}, tgt);
  const packed_batch batch{ids, positions, offsets};
  host_buffer lp(dtype::float32, {T}), hidden(dtype::float32, {T, c.hidden_size}), d_hidden(dtype::float32, {T, c.hidden_size});
  host_buffer weights(dtype::float32, {T});
  for (std::int64_t t = 0; t < T; ++t) weights.data<float>()[t] = -1.0f / static_cast<float>(T);

  const double fwd = median_seconds(reps, [&] { check(forward_logprobs(ctx, c, w, batch, targets, {}, lp)); });
  const double fwd_bwd = median_seconds(reps, [&] {
    model_activations act;
    check(forward_for_backward(ctx, c, w, batch, hidden, act, recompute_mode::none));
    check(head_backward(ctx, c, w, hidden, targets, {}, weights, d_hidden, g));
    check(model_backward(ctx, c, w, batch, act, d_hidden, g));
  });
  const double flop = forward_flops(c, layout, sequences, length);
  std::printf("%-10s %10.2fM params %3d x %-5d forward %9.0f tok/s %7.2f GFLOP/s (%4.1f%%)   forward+backward %9.0f tok/s "
              "%7.2f GFLOP/s (%4.1f%%)\n",
              name.c_str(), static_cast<double>(layout.parameter_count) / 1e6, sequences, length, static_cast<double>(T) / fwd,
              flop / fwd / 1e9, 100 * flop / fwd / gemm_rate, static_cast<double>(T) / fwd_bwd, 3 * flop / fwd_bwd / 1e9,
              100 * 3 * flop / fwd_bwd / gemm_rate);
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  const int reps = quick ? 1 : 3;
  // The ceiling: float32 GEMM of 2048^3 through the same OpenBLAS and thread pool.
  const std::int64_t n = quick ? 1024 : 2048;
  host_buffer a(dtype::float32, {n, n}), b(dtype::float32, {n, n}), o(dtype::float32, {n, n});
  const double gemm = median_seconds(reps, [&] {
    ops::cpu::gemm<float>(false, false, n, n, n, 1.f, a.data<float>(), n, b.data<float>(), n, 0.f, o.data<float>(), n);
  });
  const double rate = 2.0 * static_cast<double>(n * n * n) / gemm;
  std::printf("ceiling: float32 GEMM %lld^3 %.2f GFLOP/s (backward counted as 2x the forward's FLOPs)\n\n",
              static_cast<long long>(n), rate / 1e9);
  bench("tiny-all", preset("tiny-all"), 4, 128, reps, rate);
  bench("tiny-e", preset("tiny-e"), 4, 128, reps, rate);
  bench("tiny-dense", preset("tiny-dense"), 4, 128, reps, rate);
  bench("mid-size", mid_size(), 2, quick ? 128 : 512, reps, rate);
  return 0;
}
