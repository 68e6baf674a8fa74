// `tandem bench generate`'s measurement: a warm-up run, the timed run step by step, then the
// decode step's two ceilings and, when asked, the train engine's agreement with the samples.
#include "tools/cli/generate_bench.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <random>
#include <vector>

#include "gpu/core/device_buffer.h"
#include "gpu/core/host_waits.h"
#include "gpu/core/profiler_range.h"
#include "gpu/core/memory.h"
#include "gpu/engine/gemma4_generate_engine.h"
#include "gpu/model/checkpoint.h"
#include "tools/cli/bench_model.h"
#include "tools/cli/gemm_ceiling.h"

namespace tandem::cli {
namespace {

using clock_type = std::chrono::steady_clock;

gpu::status fail(const std::string& what, const gpu::status& s) { return {s.code(), what + ": " + s.message()}; }

double seconds_since(clock_type::time_point start) { return std::chrono::duration<double>(clock_type::now() - start).count(); }

// Bytes a decode step reads at `context` positions per sequence: every weight once (the tied
// embedding as the head's matrix; of the per-layer embedding table only the batch's rows), and each
// layer's visible K/V of every sequence (a KV-shared layer reads its store layer's again).
double decode_step_bytes(const gpu::model_config& c, const gpu::model_layout& layout, std::int64_t batch, std::int64_t context) {
  double bytes = 0;
  for (const auto& e : layout.tensors) {
    const double width = static_cast<double>(gpu::size_of(e.type));
    if (e.name.starts_with("embed_tokens_per_layer"))
      bytes += static_cast<double>(batch) * static_cast<double>(e.elements() / std::max<std::int64_t>(1, e.shape.front())) * width;
    else
      bytes += static_cast<double>(e.elements()) * width;
  }
  const double width = static_cast<double>(gpu::size_of(layout.tensors.front().type));
  for (const auto& L : c.layers) {
    const std::int64_t visible = L.type == gpu::layer_type::sliding ? std::min(context, c.sliding_window) : context;
    bytes += static_cast<double>(batch) * static_cast<double>(visible) * 2.0 * static_cast<double>(L.num_key_value_heads * L.head_dim) * width;
  }
  return bytes;
}

// Bytes moved (read plus written) per second by a device-to-device copy of a large buffer.
gpu::result<double> copy_bandwidth(const gpu::exec_context& ctx) {
  const std::int64_t bytes = ctx.dev.is_cpu() ? std::int64_t{256} << 20 : std::int64_t{1} << 30;
  gpu::device_buffer from, to;
  if (auto s = gpu::allocate_buffers(ctx, gpu::dtype::uint8, {{&from, {bytes}}, {&to, {bytes}}}); !s) return s;
  std::vector<double> times;
  for (int rep = 0; rep < 6; ++rep) {
    const auto start = clock_type::now();
    if (auto s = gpu::copy_on_device(ctx, to.data<std::byte>(), from.data<std::byte>(), bytes); !s) return s;
    if (auto s = gpu::wait_for_device(ctx); !s) return s;
    if (rep > 0) times.push_back(seconds_since(start));  // the first warms up
  }
  std::sort(times.begin(), times.end());
  return 2.0 * static_cast<double>(bytes) / times[times.size() / 2];
}

std::vector<gpu::generation_request> requests_of(const generate_bench_settings& s, std::int32_t vocab, std::int64_t new_tokens,
                                                 std::uint64_t round) {
  std::mt19937_64 rng(s.seed + round);
  std::vector<gpu::generation_request> out;
  for (std::int64_t i = 0; i < s.batch; ++i) {
    gpu::generation_request r;
    r.id = static_cast<std::uint64_t>(i);
    for (std::int64_t t = 0; t < s.prompt_len; ++t) r.prompt.push_back(static_cast<std::int32_t>(rng() % static_cast<std::uint64_t>(vocab)));
    r.max_new_tokens = static_cast<std::int32_t>(new_tokens);
    r.sampling = s.sampling;
    r.rng = {s.seed, static_cast<std::uint32_t>(round), 0, static_cast<std::uint32_t>(i), 0, 0};
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace

gpu::result<generate_bench_figures> run_generate_bench(const generate_bench_settings& s) {
  auto model = random_bench_model(s.model, s.weights, s.dev, s.seed);
  if (!model) return model.error();
  const gpu::model_config c = model->source.config;  // copies: the source moves into the engine
  const gpu::model_layout layout = model->source.layout;
  gpu::exec_context ctx;
  ctx.dev = s.dev;
  gpu::gemma4_generate_options o;
  o.max_num_sequences = s.batch;
  o.max_sequence_length = s.prompt_len + s.new_tokens;
  o.prefill_token_budget = s.prefill_token_budget;
  o.kv_block_size = s.kv_block_size;
  o.overlap_decode = s.overlap;
  // Every sequence at its full length at once, plus a partial block each: no preemption.
  const std::int64_t blocks = s.batch * ((o.max_sequence_length + s.kv_block_size - 1) / s.kv_block_size + 2);
  o.kv_cache_bytes = blocks * gpu::kv_block_bytes(c, s.weights, s.kv_block_size);
  auto engine = gpu::gemma4_generate_engine::create_with_weights(ctx, std::move(model->source), std::move(model->weights), o);
  if (!engine) return engine.error();
  gpu::gemma4_generate_engine& e = **engine;

  generate_bench_figures f;
  f.parameters = layout.parameter_count;
  f.weights_bytes = layout.total_bytes();
  f.kv_cache_bytes = o.kv_cache_bytes;
  const auto run = [&](std::int64_t new_tokens, std::uint64_t round, bool timed) -> gpu::status {
    const auto requests = requests_of(s, c.vocab_size, new_tokens, round);
    std::vector<double> decode_times;
    std::int64_t decode_waits = 0;
    double decode_waited_s = 0;
    double logprob_sum = 0;
    std::int64_t sampled = 0;
    bool profiling = false;  // armed after the timed run's first decode step: later ones are decode steps too
    const auto start = clock_type::now();
    const std::int64_t overlapped_before = e.profile().overlapped_steps;
    if (auto st = e.submit(requests); !st) return fail("submit", st);
    for (std::int64_t step = 0;; ++step) {
      const gpu::generate_profile before = e.profile();
      const std::int64_t waits_before = gpu::host_waits();
      const double waited_before = gpu::host_wait_seconds();
      const bool bracketed = timed && s.profiler_range && decode_times.size() == 2;  // the third decode step, if this is one
      if (bracketed) {
        if (auto st = gpu::profiler_range_start(ctx.dev); !st) return fail("the profiler range", st);
      }
      const auto step_start = clock_type::now();
      auto left = e.step();
      if (!left) return fail("step " + std::to_string(step), left.error());
      const double t = seconds_since(step_start);
      if (bracketed) {
        if (auto st = gpu::profiler_range_stop(ctx.dev); !st) return fail("the profiler range", st);
      }
      const std::int64_t rows = e.profile().rows - before.rows, tokens = e.profile().tokens - before.tokens;
      if (rows > 0 && rows == tokens) {  // one row per sequence, every row sampled
        decode_times.push_back(t);
        decode_waits += gpu::host_waits() - waits_before;
        decode_waited_s += gpu::host_wait_seconds() - waited_before;
        if (profiling) {
          gpu::op_profile_mark(ctx, "(host, between steps)");
          ++f.profiled_steps;
        } else if (timed && s.profile) {
          gpu::op_profile_start();
          profiling = true;
        }
      } else {
        f.prefill_ms += timed ? t * 1e3 : 0;
      }
      for (const auto& done : e.collect()) {
        for (const float lp : done.logprobs) logprob_sum += lp;
        sampled += static_cast<std::int64_t>(done.logprobs.size());
      }
      if (*left == 0) break;
    }
    if (!timed) return gpu::status::ok();
    f.total_ms = seconds_since(start) * 1e3;
    if (profiling) {
      auto p = gpu::op_profile_stop(ctx);
      if (!p) return fail("the op profile", p.error());
      f.profile = std::move(*p);
    }
    if (sampled != s.batch * new_tokens)
      return {gpu::status_code::invalid_argument, "the engine sampled " + std::to_string(sampled) + " tokens, not " + std::to_string(s.batch * new_tokens)};
    f.tokens_per_s = static_cast<double>(sampled) / (f.total_ms / 1e3);
    f.mean_logprob = logprob_sum / static_cast<double>(sampled);
    f.decode_steps = static_cast<std::int64_t>(decode_times.size());
    f.overlapped_steps = e.profile().overlapped_steps - overlapped_before;
    if (f.decode_steps > 0) f.host_waits_per_decode_step = static_cast<double>(decode_waits) / static_cast<double>(f.decode_steps);
    if (!decode_times.empty()) {
      f.decode_step_ms_mean = std::accumulate(decode_times.begin(), decode_times.end(), 0.0) / static_cast<double>(decode_times.size()) * 1e3;
      f.decode_host_ms_mean = f.decode_step_ms_mean - decode_waited_s / static_cast<double>(decode_times.size()) * 1e3;
      std::sort(decode_times.begin(), decode_times.end());
      f.decode_step_ms_median = decode_times[decode_times.size() / 2] * 1e3;
    }
    return gpu::status::ok();
  };
  if (auto st = run(std::min<std::int64_t>(s.new_tokens, 4), 1, false); !st) return fail("the warm-up run", st);
  if (auto st = run(s.new_tokens, 2, true); !st) return fail("the timed run", st);
  f.preemptions = e.preemptions();

  // The train engine's agreement with the samples (it takes the generator); else the generator
  // goes now. Either way its weights, KV cache and scratch are given back before the ceilings,
  // whose products have weights of their own (a model's worth: 26B-A4B's did not fit beside the
  // engine's on an 80 GB device).
  if (s.agreement) {
    auto a = measure_agreement(s, ctx, std::move(*engine), *s.agreement);
    if (!a) return a.error();
    f.agreement = *a;
  } else {
    engine->reset();
  }

  // The decode step's ceilings, measured after the run on the same device.
  gpu::workspace ceiling_scratch(s.dev);
  gpu::exec_context ceiling_ctx = ctx;
  ceiling_ctx.scratch = &ceiling_scratch;
  auto ceiling_s = gemm_ceiling_seconds(ceiling_ctx, s.weights, step_gemms(c, layout, s.batch), false);
  if (!ceiling_s) return fail("the GEMM ceiling", ceiling_s.error());
  f.decode_gemm_ceiling_ms = *ceiling_s * 1e3;
  auto bandwidth = copy_bandwidth(ceiling_ctx);
  if (!bandwidth) return fail("the copy bandwidth", bandwidth.error());
  f.copy_gb_per_s = *bandwidth / 1e9;
  // Decode steps run at contexts P + 1 .. P + N - 1 (the step sampling token j reads j positions after the prompt).
  double bytes = 0;
  for (std::int64_t j = 1; j < s.new_tokens; ++j) bytes += decode_step_bytes(c, layout, s.batch, s.prompt_len + j);
  f.decode_bytes = s.new_tokens > 1 ? bytes / static_cast<double>(s.new_tokens - 1) : decode_step_bytes(c, layout, s.batch, s.prompt_len);
  f.roofline_ms = f.decode_bytes / *bandwidth * 1e3;
  if (f.decode_step_ms_median > 0) {
    f.ceiling_fraction = f.decode_gemm_ceiling_ms / f.decode_step_ms_median;
    f.roofline_fraction = f.roofline_ms / f.decode_step_ms_median;
  }
  return f;
}

}  // namespace tandem::cli
