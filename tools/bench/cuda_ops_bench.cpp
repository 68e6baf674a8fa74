// CUDA backend throughput: each op's time on Gemma 4 shapes (bfloat16 storage), printed beside
// the ceiling it should approach, measured in the same run:
//   - element-wise ops and norms: the device-to-device copy bandwidth (bytes read + written);
//   - matrix products: cuBLASLt (through linear_forward) on an 8192³ product;
//   - attention: TFLOP/s (4·heads·tokens·context·d forward, 2.5× that backward; context = the
//     mean keys a query sees), beside cuDNN's fused attention on the same problem (where cuDNN
//     takes it: not at head_dim 512 on Hopper) and the 8192³ GEMM rate.
// Times are medians of CUDA-event-timed batches of 10 back-to-back calls after a warm-up, per call
// (every row and ceiling alike, so that one call's launch work overlaps the last one's device
// work, as in a step; timing single calls on an idle device adds the launch latency, several
// microseconds, to kernels of 60-100 us), except the 8192³ GEMM, timed a call at a time. A figure
// to read, not a gate.
// Usage: cuda_ops_bench [--quick] [--attention (the attention rows only)] [--only OP_PREFIX (the
// groups of rows with an op of that prefix, e.g. rmsnorm_backward or logprobs)] [--rows NAME (the
// attention rows of that name only: causal or sliding, e.g. to profile one kernel)]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cudnn_attention.h"
#include "gpu/core/device_hash.h"
#include "gpu/core/device_query.h"
#include "gpu/core/exec_context.h"
#include "gpu/core/memory.h"
#include "gpu/ops/adamw.h"
#include "gpu/ops/attention.h"
#include "gpu/ops/dispatch.h"
#include "gpu/ops/elementwise.h"
#include "gpu/ops/embedding.h"
#include "gpu/ops/gated_mlp.h"
#include "gpu/ops/linear.h"
#include "gpu/ops/logprobs.h"
#include "gpu/ops/rmsnorm.h"
#include "gpu/ops/rope.h"
#include "gpu/ops/softcap.h"
#include "gpu/ops/sum_squares.h"

using namespace tandem::gpu;

namespace {

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "cuda_ops_bench: %s\n", what.c_str());
  std::exit(1);
}

void check(const status& s, const char* what) {
  if (!s) fail(std::string(what) + ": " + s.message());
}

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) fail(std::string(what) + ": " + cudaGetErrorString(e));
}

/// A device tensor filled with small pseudo-random values (never zeros: they run faster).
struct buffer {
  void* p = nullptr;
  tensor t;
  buffer(dtype type, std::vector<std::int64_t> shape, float lo = -1, float hi = 1) {
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    const std::int64_t bytes = n * static_cast<std::int64_t>(size_of(type));
    auto a = device_allocate(device::cuda(0), std::max<std::int64_t>(bytes, 1));
    if (!a) fail("device_allocate of " + std::to_string(bytes) + " bytes: " + a.error().message());
    p = *a;
    t = tensor::contiguous(p, type, shape, device::cuda(0));
    fill(lo, hi);
  }
  ~buffer() { device_free(device::cuda(0), p); }
  buffer(const buffer&) = delete;
  buffer& operator=(const buffer&) = delete;
  void fill(float lo, float hi) {
    const std::int64_t n = t.numel();
    const std::int64_t chunk = std::min<std::int64_t>(n, 1 << 22);
    std::vector<unsigned char> host(static_cast<std::size_t>(chunk) * size_of(t.type()));
    std::uint64_t x = 0x9E3779B97F4A7C15ull;
    for (std::int64_t i = 0; i < chunk; ++i) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      const float u = lo + (hi - lo) * static_cast<float>(x >> 40) / static_cast<float>(1 << 24);
      if (t.type() == dtype::float32) {
        std::memcpy(&host[static_cast<std::size_t>(i) * 4], &u, 4);
      } else if (t.type() == dtype::bfloat16) {
        std::uint32_t bits;
        std::memcpy(&bits, &u, 4);
        const std::uint16_t b = static_cast<std::uint16_t>(bits >> 16);
        std::memcpy(&host[static_cast<std::size_t>(i) * 2], &b, 2);
      } else if (t.type() == dtype::uint8) {
        host[static_cast<std::size_t>(i)] = static_cast<unsigned char>(x >> 56);
      } else {  // int32 ids
        const std::int32_t id = static_cast<std::int32_t>(x % static_cast<std::uint64_t>(std::max(hi, 1.f)));
        std::memcpy(&host[static_cast<std::size_t>(i) * 4], &id, 4);
      }
    }
    for (std::int64_t at = 0; at < n; at += chunk) {
      const std::int64_t count = std::min(chunk, n - at);
      check(copy_to_device(device::cuda(0), static_cast<char*>(p) + at * size_of(t.type()), host.data(),
                           count * static_cast<std::int64_t>(size_of(t.type()))),
            "upload");
    }
  }
};

/// The host's median milliseconds to enqueue the last time_ms's call (its launches, not the device's
/// work): a row whose device time is not above it measures the host, not the kernel.
double last_host_ms = 0;

/// Median milliseconds of `reps` event-timed calls after `warm` untimed ones.
double time_ms(int warm, int reps, const std::function<status()>& f) {
  for (int i = 0; i < warm; ++i) check(f(), "warm-up");
  check_cuda(cudaDeviceSynchronize(), "warm-up sync");
  cudaEvent_t a, b;
  check_cuda(cudaEventCreate(&a), "event");
  check_cuda(cudaEventCreate(&b), "event");
  std::vector<double> ms, host;
  for (int i = 0; i < reps; ++i) {
    check_cuda(cudaEventRecord(a), "record");
    const auto enqueue = std::chrono::steady_clock::now();
    check(f(), "timed call");
    host.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - enqueue).count());
    check_cuda(cudaEventRecord(b), "record");
    check_cuda(cudaEventSynchronize(b), "sync");
    float t = 0;
    check_cuda(cudaEventElapsedTime(&t, a, b), "elapsed");
    ms.push_back(t);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  std::sort(host.begin(), host.end());
  last_host_ms = host[host.size() / 2];
  return ms[ms.size() / 2];
}

/// Median milliseconds per call of `reps` event-timed batches of `calls` back-to-back calls (the
/// host's launch work overlaps the device's, as in a training step).
double time_ms_batched(int warm, int reps, int calls, const std::function<status()>& f) {
  const double ms = time_ms(warm, reps, [&] {
    for (int i = 0; i < calls; ++i) {
      const status s = f();
      if (!s) return s;
    }
    return status::ok();
  });
  last_host_ms /= calls;
  return ms / calls;
}

struct row {
  std::string op, shape;
  double ms, figure, ceiling;
  const char* unit;
};

void print(const row& r) {
  std::printf("%-28s %-42s %9.3f ms %9.1f %-6s %6.1f%% of %.1f\n", r.op.c_str(), r.shape.c_str(), r.ms, r.figure, r.unit,
              100.0 * r.figure / r.ceiling, r.ceiling);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false, attention_only = false;
  std::string only;  // a prefix of the ops to run (their group's buffers only); empty: all
  std::string row_filter;  // a prefix of the attention rows' names to run; empty: all
  const char* usage = " (usage: cuda_ops_bench [--quick] [--attention] [--only OP_PREFIX] [--rows causal|sliding])";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;
    else if (std::strcmp(argv[i], "--attention") == 0) attention_only = true;
    else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) only = argv[++i];
    else if (std::strcmp(argv[i], "--rows") == 0 && i + 1 < argc) row_filter = argv[++i];
    else fail(std::string("unknown argument ") + argv[i] + usage);
  }
  // Whether a group of rows runs: one of its ops begins with `only`.
  const auto wanted = [&](std::initializer_list<const char*> ops) {
    if (only.empty()) return true;
    for (const char* op : ops)
      if (std::string(op).rfind(only, 0) == 0) return true;
    return false;
  };
  const backend_info info = query_backend();
  if (info.devices.empty()) {
    std::printf("cuda_ops_bench: skipped: no CUDA device (%s)\n", info.device_problem.c_str());
    return 77;
  }
  std::printf("device: %s; cuBLAS %s; times: median per call of CUDA-event-timed batches of 10 calls\n", info.devices[0].name.c_str(),
              info.cublas.c_str());
  workspace scratch(device::cuda(0));
  exec_context ctx;
  ctx.dev = device::cuda(0);
  ctx.scratch = &scratch;
  const int warm = 3, reps = quick ? 5 : 20;
  // Milliseconds per call of f, over batches of 10 back-to-back calls (every row and ceiling).
  const auto timed = [&](const std::function<status()>& f) { return time_ms_batched(warm, reps, 10, f); };
  const dtype bf = dtype::bfloat16;

  // Ceilings.
  double copy_gbs = 0, gemm_tflops = 0;
  {
    const std::int64_t bytes = std::int64_t{1} << 30;
    buffer src(dtype::uint8, {bytes}, 0, 255), dst(dtype::uint8, {bytes}, 0, 255);
    const double ms = timed([&] {
      return cudaMemcpyAsync(dst.p, src.p, bytes, cudaMemcpyDeviceToDevice) == cudaSuccess
                 ? status::ok()
                 : status{status_code::device_error, "cudaMemcpyAsync"};
    });
    copy_gbs = 2.0 * bytes / ms / 1e6;
    std::printf("ceiling: device-to-device copy of 1 GiB: %.3f ms, %.0f GB/s (read + written)\n", ms, copy_gbs);
  }
  {
    const std::int64_t n = 8192;
    buffer x(bf, {n, n}), w(bf, {n, n}), y(bf, {n, n});
    const double ms = time_ms(warm, reps, [&] { return ops::linear_forward(ctx, x.t, w.t, y.t); });
    gemm_tflops = 2.0 * n * n * n / ms / 1e9;
    std::printf("ceiling: cuBLASLt bf16 GEMM 8192^3 (linear_forward): %.3f ms, %.0f TFLOP/s\n\n", ms, gemm_tflops);
  }
  std::printf("%-28s %-42s %12s %16s %s\n", "op", "shape (bf16 storage)", "time", "figure", "fraction of ceiling");

  if (!attention_only) {
  // Element-wise ops and norms over the residual stream of 16384 tokens of E2B (H 2560).
  const std::int64_t tokens = 16384, hidden = 2560, inter = 6144 * 2;
  const auto bandwidth = [&](const std::string& op, const std::string& shape, double bytes, const std::function<status()>& f) {
    const double ms = timed(f);
    print({op, shape, ms, bytes / ms / 1e6, copy_gbs, "GB/s"});
    // A short op whose launches take the host as long as the device takes to run it: the row
    // then measures the host.
    if (last_host_ms >= 0.8 * ms) std::printf("  (host-bound: %.1f us a call to enqueue)\n", last_host_ms * 1e3);
  };
  if (wanted({"rmsnorm_forward", "rmsnorm_backward", "add_forward", "softcap_forward", "scale_by_forward"})) {
    buffer x(bf, {tokens, hidden}), w(bf, {hidden}, 0.5, 1.5), y(bf, {tokens, hidden}), dy(bf, {tokens, hidden});
    buffer dx(bf, {tokens, hidden}), dw(bf, {hidden}), inv(dtype::float32, {tokens});
    const double e = static_cast<double>(tokens * hidden) * 2;
    const std::string shape = "[16384, 2560]";
    bandwidth("rmsnorm_forward", shape, 2 * e, [&] { return ops::rmsnorm_forward(ctx, x.t, w.t, 1e-6, y.t, inv.t); });
    bandwidth("rmsnorm_backward", shape, 3 * e, [&] { return ops::rmsnorm_backward(ctx, x.t, w.t, inv.t, dy.t, dx.t, dw.t); });
    bandwidth("add_forward", shape, 3 * e, [&] { return ops::add_forward(ctx, x.t, dy.t, y.t); });
    bandwidth("softcap_forward", shape, 2 * e, [&] { return ops::softcap_forward(ctx, x.t, 30.0, y.t); });
    buffer s(bf, {1}, 0.5, 1);
    bandwidth("scale_by_forward", shape, 2 * e, [&] { return ops::scale_by_forward(ctx, x.t, s.t, y.t); });
  }
  // The chunked XXH3 of device memory (a refit bucket's checksum, the weights' digest): 1 GiB
  // read once, against the copy's read + written bytes; the call's read-back of the hashes and
  // its wait included.
  if (wanted({"chunked_xxh3_on"})) {
    const std::int64_t bytes = std::int64_t{1} << 30;
    buffer b(dtype::uint8, {bytes}, 0, 255);
    bandwidth("chunked_xxh3_on", "[1 GiB] bytes", static_cast<double>(bytes), [&]() -> status {
      auto h = chunked_xxh3_on(ctx, static_cast<const std::byte*>(b.p), bytes);
      return h ? status::ok() : h.error();
    });
  }
  // The norms of the E2B train step at 4096 tokens: the residual stream (H 1536), the q norm's
  // rows (8 heads of 256; in the forward rmsnorm_rope_forward below takes them with the rotation),
  // the per-layer inputs' norm (35 layers of 256).
  const std::pair<std::int64_t, std::int64_t> e2b_norms[] = {{4096, 1536}, {4096 * 8, 256}, {4096 * 35, 256}};
  if (wanted({"rmsnorm_forward"})) {
    for (const auto& [rows, width] : e2b_norms) {
      buffer x(bf, {rows, width}), w(bf, {width}, 0.5, 1.5), y(bf, {rows, width}), inv(dtype::float32, {rows});
      const double e = static_cast<double>(rows * width) * 2;
      bandwidth("rmsnorm_forward", "[" + std::to_string(rows) + ", " + std::to_string(width) + "]", 2 * e,
                [&] { return ops::rmsnorm_forward(ctx, x.t, w.t, 1e-6, y.t, inv.t); });
    }
  }
  if (wanted({"rmsnorm_backward"})) {
    for (const auto& [rows, width] : e2b_norms) {
      buffer x(bf, {rows, width}), w(bf, {width}, 0.5, 1.5), dy(bf, {rows, width}), dx(bf, {rows, width}), dw(bf, {width});
      buffer inv(dtype::float32, {rows});
      const double e = static_cast<double>(rows * width) * 2;
      bandwidth("rmsnorm_backward", "[" + std::to_string(rows) + ", " + std::to_string(width) + "]", 3 * e,
                [&] { return ops::rmsnorm_backward(ctx, x.t, w.t, inv.t, dy.t, dx.t, dw.t); });
      // The same bytes moved by the plainest kernel (two tensors read, one written): what one
      // pass over a tensor this small reaches against the 1 GiB copy.
      bandwidth("add_forward", "[" + std::to_string(rows) + ", " + std::to_string(width) + "] (the norm's bytes)", 3 * e,
                [&] { return ops::add_forward(ctx, x.t, dy.t, dx.t); });
    }
  }
  if (wanted({"gated_gelu_forward", "gated_gelu_backward"})) {
    const std::int64_t n = quick ? 4096 : tokens;
    buffer g(bf, {n, inter / 2}), u(bf, {n, inter / 2}), h(bf, {n, inter / 2}), dh(bf, {n, inter / 2});
    buffer dg(bf, {n, inter / 2}), du(bf, {n, inter / 2});
    const double e = static_cast<double>(n * inter / 2) * 2;
    const std::string shape = "[" + std::to_string(n) + ", 6144]";
    bandwidth("gated_gelu_forward", shape, 3 * e, [&] { return ops::gated_gelu_forward(ctx, g.t, u.t, h.t); });
    bandwidth("gated_gelu_backward", shape, 5 * e, [&] { return ops::gated_gelu_backward(ctx, g.t, u.t, dh.t, dg.t, du.t); });
  }
  if (wanted({"rope_forward"})) {
    // RoPE on the queries of a sliding layer: 8 heads of 256.
    const std::int64_t heads = 8, d = 256;
    buffer x(bf, {tokens, heads, d}), y(bf, {tokens, heads, d}), pos(dtype::int32, {tokens}, 0, 8192);
    buffer inv(dtype::float32, {d / 2}), c(bf, {tokens, d}), s(bf, {tokens, d});
    check(ops::rope_inv_freq(ctx, {}, d, inv.t), "rope_inv_freq");
    check(ops::rope_tables(ctx, pos.t, inv.t, c.t, s.t), "rope_tables");
    const double e = static_cast<double>(tokens * heads * d) * 2;
    bandwidth("rope_forward", "[16384, 8, 256]", 2 * e + 2.0 * tokens * d * 2,
              [&] { return ops::rope_forward(ctx, x.t, c.t, s.t, y.t); });
  }
  if (wanted({"rmsnorm_rope_forward"})) {
    // The q norm and rotation of E2B's train step at 4096 tokens: 8 heads of 256 (sliding
    // layers) and of 512 (full layers).
    for (const std::int64_t d : {256, 512}) {
      const std::int64_t t = 4096, heads = 8;
      buffer x(bf, {t, heads, d}), y(bf, {t, heads, d}), w(bf, {d}, 0.5, 1.5), pos(dtype::int32, {t}, 0, 8192);
      buffer inv(dtype::float32, {d / 2}), c(bf, {t, d}), s(bf, {t, d}), stat(dtype::float32, {t * heads});
      check(ops::rope_inv_freq(ctx, {}, d, inv.t), "rope_inv_freq");
      check(ops::rope_tables(ctx, pos.t, inv.t, c.t, s.t), "rope_tables");
      const double e = static_cast<double>(t * heads * d) * 2;
      bandwidth("rmsnorm_rope_forward", "[4096, 8, " + std::to_string(d) + "]", 2 * e + 2.0 * t * d * 2,
                [&] { return ops::rmsnorm_rope_forward(ctx, x.t, w.t, 1e-6, c.t, s.t, y.t, stat.t); });
    }
  }
  if (wanted({"embedding_forward"})) {
    // The per-layer embedding lookup: 16384 tokens x 35 layers x 256 of a 262144-row table.
    const std::int64_t width = 35 * 256, vocab = 262144;
    buffer table(bf, {vocab, width}), ids(dtype::int32, {tokens}, 0, static_cast<float>(vocab)), out(bf, {tokens, width});
    const double e = static_cast<double>(tokens * width) * 2;
    bandwidth("embedding_forward", "ids [16384] of [262144, 8960]", 2 * e,
              [&] { return ops::embedding_forward(ctx, ids.t, table.t, 16.0, out.t); });
  }
  if (wanted({"adamw_step"})) {
    const std::int64_t n = std::int64_t{1} << 28;
    buffer p(dtype::float32, {n}), g(dtype::float32, {n}), m(dtype::float32, {n}), v(dtype::float32, {n}, 0, 1), copy(bf, {n});
    ops::adamw_hyper h;
    bandwidth("adamw_step", "2^28, fp32 master+moments, bf16 copy", n * (4.0 * 4 + 3 * 4 + 2),
              [&] { return ops::adamw_step(ctx, p.t, g.t, m.t, v.t, h, copy.t); });
  }
  if (wanted({"sum_squares"})) {
    // The gradient norm over E2B's per-layer embedding (262144 x 8960, one range of 2.35e9
    // elements) and 256 ranges of 65536 after it; each call waits for its sums on the host.
    const std::int64_t big = std::int64_t{262144} * 8960, small = 65536, count = 256, n = big + count * small;
    buffer x(bf, {n});
    std::vector<ops::element_range> ranges{{0, big}};
    for (std::int64_t r = 0; r < count; ++r) ranges.push_back({big + r * small, small});
    std::vector<double> sums(ranges.size());
    bandwidth("sum_squares", "[2.35e9] + 256 x [65536]", n * 2.0, [&] { return ops::sum_squares(ctx, x.t, ranges, sums); });
  }
  if (wanted({"logprobs_forward", "logprobs_backward"})) {
    const std::int64_t rows = quick ? 256 : 1024, vocab = 262144;
    buffer logits(bf, {rows, vocab}, -20, 20), targets(dtype::int32, {rows}, 0, static_cast<float>(vocab));
    buffer lp(dtype::float32, {rows}), dlp(dtype::float32, {rows}), dlogits(bf, {rows, vocab});
    ops::sampling_params p;
    const double e = static_cast<double>(rows * vocab) * 2;
    const std::string shape = "[" + std::to_string(rows) + ", 262144]";
    bandwidth("logprobs_forward", shape, e, [&] { return ops::logprobs_forward(ctx, logits.t, targets.t, p, lp.t); });
    bandwidth("logprobs_backward", shape, 2 * e,
              [&] { return ops::logprobs_backward(ctx, logits.t, targets.t, p, dlp.t, dlogits.t); });
  }

  // Matrix products of E2B at 4096 tokens.
  const auto flops = [&](const std::string& op, const std::string& shape, double f, const std::function<status()>& fn) {
    const double ms = timed(fn);
    print({op, shape, ms, f / ms / 1e9, gemm_tflops, "TFLOP/s"});
  };
  if (wanted({"linear_forward", "linear_backward"})) {
    const std::int64_t n = 4096;
    buffer x(bf, {n, hidden}), w(bf, {inter, hidden}), y(bf, {n, inter}), dx(bf, {n, hidden}), dw(bf, {inter, hidden});
    flops("linear_forward", "x [4096, 2560] w [12288, 2560]", 2.0 * n * hidden * inter,
          [&] { return ops::linear_forward(ctx, x.t, w.t, y.t); });
    flops("linear_backward", "dx and dw", 4.0 * n * hidden * inter,
          [&] { return ops::linear_backward(ctx, x.t, w.t, y.t, dx.t, dw.t); });
  }

  }

  // Attention, one sequence of 4096 tokens.
  struct attn {
    const char* name;
    std::int64_t heads, kv_heads, d, window;
  };
  const std::vector<attn> attention_rows =
      wanted({"attention_forward", "attention_backward"})
          ? std::vector<attn>{{"causal", 8, 1, 256, 0}, {"sliding 512", 8, 1, 256, 512},
                              // (beside 512: a window's cost a key tile and its fixed cost a query tile)
                              {"sliding 128", 8, 1, 256, 128}, {"sliding 2048", 8, 1, 256, 2048}, {"causal", 8, 1, 512, 0},
                              {"causal", 32, 4, 512, 0}}
          : std::vector<attn>{};
  for (const attn& a : attention_rows) {
    if (std::string(a.name).rfind(row_filter, 0) != 0) continue;
    const std::int64_t t = 4096;
    buffer q(bf, {t, a.heads, a.d}), k(bf, {t, a.kv_heads, a.d}), v(bf, {t, a.kv_heads, a.d}), o(bf, {t, a.heads, a.d});
    buffer lse(dtype::float32, {t, a.heads}), dout(bf, {t, a.heads, a.d}), dq(bf, {t, a.heads, a.d});
    buffer dk(bf, {t, a.kv_heads, a.d}), dv(bf, {t, a.kv_heads, a.d});
    void* cu_p = nullptr;
    std::int32_t cu_host[2] = {0, static_cast<std::int32_t>(t)};
    auto cu_a = device_allocate(device::cuda(0), 8);
    if (!cu_a) fail("cu_seqlens");
    cu_p = *cu_a;
    check(copy_to_device(device::cuda(0), cu_p, cu_host, 8), "cu_seqlens");
    const tensor cu = tensor::contiguous(cu_p, dtype::int32, std::vector<std::int64_t>{2}, device::cuda(0));
    ops::attention_options opt;
    opt.sliding_window = a.window;
    // Mean keys per query: (t + 1) / 2 causal; the band (minus its ramp) with a window.
    const double context = a.window ? (a.window * (t - a.window) + a.window * (a.window + 1) / 2.0) / t : (t + 1) / 2.0;
    const double fwd = 4.0 * a.heads * t * context * a.d;
    const std::string shape = std::string(a.name) + ", d " + std::to_string(a.d) + ", heads " + std::to_string(a.heads) +
                              "/" + std::to_string(a.kv_heads) + ", 4096";
    const double ours_fwd = timed([&] { return ops::attention_forward(ctx, q.t, k.t, v.t, cu, o.t, lse.t, opt); });
    const double ours_bwd =
        timed([&] { return ops::attention_backward(ctx, q.t, k.t, v.t, cu, lse.t, dout.t, dq.t, dk.t, dv.t, opt, false, o.t); });
    device_free(device::cuda(0), cu_p);
    // The peer: cuDNN's fused attention on the same problem, in this run.
    auto peer = tandem::bench::cudnn_attention::make({t, a.heads, a.kv_heads, a.d, a.window});
    // Where cuDNN declines the backward alone (d 512 on Hopper), its forward is still the peer.
    const status peer_fwd_state = peer ? status::ok() : peer.error();
    const status peer_bwd_state = peer ? (*peer)->backward_status() : peer.error();
    const double peer_fwd = peer_fwd_state ? timed([&] { return (*peer)->forward(); }) : 0;
    const double peer_bwd = peer_bwd_state ? timed([&] { return (*peer)->backward(); }) : 0;
    for (const bool backward : {false, true}) {
      const double ms = backward ? ours_bwd : ours_fwd, f = (backward ? 2.5 : 1.0) * fwd / ms / 1e9;
      print({backward ? "attention_backward" : "attention_forward", shape, ms, f, gemm_tflops, "TFLOP/s"});
      if (const status& state = backward ? peer_bwd_state : peer_fwd_state; state) {
        const double pms = backward ? peer_bwd : peer_fwd, pf = (backward ? 2.5 : 1.0) * fwd / pms / 1e9;
        std::printf("%-28s %-42s %9.3f ms %9.1f %-6s ours = %.0f%% of cuDNN\n", "  cuDNN (same problem)", "", pms, pf,
                    "TFLOP/s", 100.0 * f / pf);
      } else {
        std::printf("  cuDNN (same problem): none: %s\n", state.message().c_str());
      }
    }
  }
  return 0;
}
