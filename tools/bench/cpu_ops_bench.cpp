// CPU backend throughput: each op's time on Gemma-4-like shapes, printed beside the ceilings
// measured in the same run (the machine's memory-copy bandwidth and its large-GEMM FLOP rate).
// A figure to read, not a gate. Usage: cpu_ops_bench [--quick]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "gpu/core/host_buffer.h"
#include "gpu/ops/attention.h"
#include "gpu/ops/cpu/gemm.h"
#include "gpu/ops/embedding.h"
#include "gpu/ops/gated_mlp.h"
#include "gpu/ops/linear.h"
#include "gpu/ops/logprobs.h"
#include "gpu/ops/moe.h"
#include "gpu/ops/rmsnorm.h"
#include "gpu/ops/rope.h"
#include "gpu/ops/sampling.h"

#include "gpu/core/exec_context.h"

namespace {
// Every op of this file runs on the CPU, on the calling thread.
const tandem::gpu::exec_context ctx = tandem::gpu::exec_context::cpu();
}  // namespace

using namespace tandem::gpu;
using clock_type = std::chrono::steady_clock;

namespace {

/// Median seconds of `reps` runs after one warm-up; exits on an op error (a benchmark bug).
double time_it(int reps, const std::function<status()>& f) {
  if (status s = f(); !s) {
    std::fprintf(stderr, "benchmark op failed: %s\n", s.message().c_str());
    std::exit(1);
  }
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto a = clock_type::now();
    (void)f();
    t.push_back(std::chrono::duration<double>(clock_type::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

host_buffer filled(dtype type, std::vector<std::int64_t> shape, float value) {
  host_buffer b(type, std::move(shape));
  std::fill(b.data<float>(), b.data<float>() + b.numel(), value);
  return b;
}

host_buffer noise(std::vector<std::int64_t> shape, float scale) {
  host_buffer b(dtype::float32, std::move(shape));
  std::uint32_t s = 12345;
  for (auto& x : b.span<float>()) {
    s = s * 1664525u + 1013904223u;
    x = scale * (static_cast<float>(s >> 8) * 0x1.0p-24f - 0.5f);
  }
  return b;
}

struct ceilings {
  double bandwidth = 0;  // bytes/s, memcpy of a buffer far larger than the caches
  double flops = 0;      // FLOP/s, float32 GEMM 2048^3
};

void row(const char* op, const std::string& shape, double seconds, double flop, double bytes, const ceilings& c) {
  const double gflops = flop / seconds / 1e9, gbs = bytes / seconds / 1e9;
  const double pct = flop > 0 ? 100 * flop / seconds / c.flops : 100 * bytes / seconds / c.bandwidth;
  std::printf("%-22s %-34s %9.3f ms %9.2f GFLOP/s %8.2f GB/s %6.1f%% of %s\n", op, shape.c_str(), seconds * 1e3,
              gflops, gbs, pct, flop > 0 ? "GEMM peak" : "memcpy");
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const int reps = quick ? 3 : 7;
  ceilings c;
  {
    const std::size_t n = 256u << 20;
    std::vector<char> a(n, 1), b(n, 0);
    const double t = time_it(reps, [&] { std::memcpy(b.data(), a.data(), n); return status::ok(); });
    c.bandwidth = 2.0 * static_cast<double>(n) / t;  // read + write
  }
  {
    const std::int64_t n = 2048;
    auto a = noise({n, n}, 1), b = noise({n, n}, 1);
    host_buffer o(dtype::float32, {n, n});
    const double t = time_it(reps, [&] {
      ops::cpu::gemm<float>(false, false, n, n, n, 1.f, a.data<float>(), n, b.data<float>(), n, 0.f, o.data<float>(), n);
      return status::ok();
    });
    c.flops = 2.0 * n * n * n / t;
  }
  std::printf("ceilings: memcpy %.2f GB/s (read + write, DRAM-sized buffer; ops whose data fit in cache can pass it),"
              " float32 GEMM 2048^3 %.2f GFLOP/s\n\n", c.bandwidth / 1e9,
              c.flops / 1e9);

  const std::int64_t T = quick ? 256 : 1024, H = 1536, I = 6144, nh = 8, d = 256, V = 262144;
  {  // linear: the E2B MLP up projection
    auto x = noise({T, H}, 1), w = noise({I, H}, 0.05f);
    host_buffer y(dtype::float32, {T, I});
    const double t = time_it(reps, [&] { return ops::linear_forward(ctx, x, w, y); });
    row("linear_forward", "[" + std::to_string(T) + ",1536]x[6144,1536]^T", t, 2.0 * T * H * I, 0, c);
    host_buffer dx(dtype::float32, {T, H}), dw(dtype::float32, {I, H});
    const double tb = time_it(reps, [&] { return ops::linear_backward(ctx, x, w, y, dx, dw); });
    row("linear_backward", "dx and dw", tb, 4.0 * T * H * I, 0, c);
  }
  {
    auto x = noise({T, H}, 1), w = filled(dtype::float32, {H}, 1.f);
    host_buffer y(dtype::float32, {T, H}), r(dtype::float32, {T});
    const double t = time_it(reps, [&] { return ops::rmsnorm_forward(ctx, x, w, 1e-6, y, r); });
    row("rmsnorm_forward", "[" + std::to_string(T) + ",1536]", t, 0, 2.0 * T * H * 4, c);
  }
  {
    auto gate = noise({T, I}, 2), up = noise({T, I}, 2);
    host_buffer h(dtype::float32, {T, I});
    const double t = time_it(reps, [&] { return ops::gated_gelu_forward(ctx, gate, up, h); });
    row("gated_gelu_forward", "[" + std::to_string(T) + ",6144]", t, 0, 3.0 * T * I * 4, c);
  }
  {
    host_buffer pos(dtype::int32, {T}), inv(dtype::float32, {d / 2}), cs(dtype::float32, {T, d}), sn(dtype::float32, {T, d});
    for (std::int64_t i = 0; i < T; ++i) pos.data<std::int32_t>()[i] = static_cast<std::int32_t>(i);
    (void)ops::rope_inv_freq(ctx, {}, d, inv);
    (void)ops::rope_tables(ctx, pos, inv, cs, sn);
    auto x = noise({T, nh, d}, 1);
    host_buffer y(dtype::float32, {T, nh, d});
    const double t = time_it(reps, [&] { return ops::rope_forward(ctx, x, cs, sn, y); });
    row("rope_forward", "[" + std::to_string(T) + ",8,256]", t, 0, 4.0 * T * nh * d * 4, c);
  }
  for (std::int64_t window : {std::int64_t{0}, std::int64_t{512}}) {
    auto q = noise({T, nh, d}, 0.2f), k = noise({T, 1, d}, 0.2f), v = noise({T, 1, d}, 1);
    host_buffer cu(dtype::int32, {2}), o(dtype::float32, {T, nh, d}), lse(dtype::float32, {T, nh});
    cu.data<std::int32_t>()[1] = static_cast<std::int32_t>(T);
    ops::attention_options opt;
    opt.sliding_window = window;
    const double t = time_it(reps, [&] { return ops::attention_forward(ctx, q, k, v, cu, o, lse, opt); });
    const double keys = window ? std::min<double>(static_cast<double>(window), T / 2.0) * T : T * (T + 1) / 2.0;
    row("attention_forward", std::string(window ? "W=512, " : "full, ") + std::to_string(T) + " tok, 8 q / 1 kv heads",
        t, 4.0 * keys * nh * d, 0, c);
  }
  {
    const std::int64_t rows = quick ? 4 : 16;
    auto logits = noise({rows, V}, 8);
    host_buffer targets(dtype::int32, {rows}), lp(dtype::float32, {rows}), tok(dtype::int32, {rows});
    const double t = time_it(reps, [&] { return ops::logprobs_forward(ctx, logits, targets, {}, lp); });
    row("logprobs_forward", std::to_string(rows) + " rows x 262144, no filter", t, 0, 1.0 * rows * V * 4, c);
    ops::sampling_params p{0.7, 20, 0.9};
    const double tf = time_it(reps, [&] { return ops::logprobs_forward(ctx, logits, targets, p, lp); });
    row("logprobs_forward", "T 0.7, top-k 20, top-p 0.9", tf, 0, 1.0 * rows * V * 4, c);
    std::vector<rng_coordinates> at(static_cast<std::size_t>(rows));
    const double ts = time_it(reps, [&] { return ops::sampling_forward(ctx, logits, p, at, tok, lp); });
    row("sampling_forward", "T 0.7, top-k 20, top-p 0.9", ts, 0, 1.0 * rows * V * 4, c);
  }
  {
    const std::int64_t N = quick ? 64 : 256, E = 16, K = 4, Hm = 1024, Im = 512;
    auto y = noise({N, Hm}, 1), gu = noise({E, 2 * Im, Hm}, 0.05f), dn = noise({E, Hm, Im}, 0.05f);
    host_buffer w(dtype::float32, {N, K}), idx(dtype::int32, {N, K}), out(dtype::float32, {N, Hm});
    for (std::int64_t t = 0; t < N; ++t)
      for (std::int64_t s = 0; s < K; ++s) {
        w.data<float>()[t * K + s] = 0.25f;
        idx.data<std::int32_t>()[t * K + s] = static_cast<std::int32_t>((t * 7 + s * 3) % E);
      }
    const double t = time_it(reps, [&] { return ops::moe_experts_forward(ctx, y, gu, dn, w, idx, out); });
    row("moe_experts_forward", std::to_string(N) + " tok, E16 K4, 1024->512", t, 2.0 * N * K * 3 * Hm * Im, 0, c);
  }
  {
    const std::int64_t Vs = 65536;
    auto table = noise({Vs, H}, 1);
    host_buffer ids(dtype::int32, {T}), out(dtype::float32, {T, H});
    for (std::int64_t i = 0; i < T; ++i) ids.data<std::int32_t>()[i] = static_cast<std::int32_t>((i * 7919) % Vs);
    const double t = time_it(reps, [&] { return ops::embedding_forward(ctx, ids, table, 39.25, out); });
    row("embedding_forward", std::to_string(T) + " ids of [65536,1536]", t, 0, 2.0 * T * H * 4, c);
  }
  return 0;
}
