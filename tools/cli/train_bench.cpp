// `tandem bench train`'s measurement: the engine's steps, then the same matrix products alone.
#include "tools/cli/train_bench.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <random>
#include <vector>

#include "gpu/core/device_buffer.h"
#include "gpu/core/memory.h"
#include "gpu/engine/gemma4_train_engine.h"
#include "gpu/model/checkpoint.h"
#include "gpu/model/model_flops.h"
#include "tools/cli/bench_model.h"
#include "tools/cli/gemm_ceiling.h"

namespace tandem::cli {
namespace {

using clock_type = std::chrono::steady_clock;

gpu::status fail(const std::string& what, const gpu::status& s) { return {s.code(), what + ": " + s.message()}; }

double ms_since(clock_type::time_point start) {
  return std::chrono::duration<double>(clock_type::now() - start).count() * 1e3;
}

// The device's memory in use while training, offloaded and restored (a step has just run: its
// gradients are applied, its activations freed into the allocator's cache), with the times of the
// transitions (offloaded and restored twice) and one more step after them.
gpu::status memory_by_phase(const gpu::exec_context& ctx, gpu::gemma4_train_engine& engine,
                            const gpu::train_engine::supervised_micro_batch& mb, std::int64_t predicted,
                            train_bench_figures& f) {
  auto in_use = [&](const char* phase, std::int64_t& out) -> gpu::status {
    if (ctx.dev.is_cpu()) return gpu::status::ok();  // stays -1
    auto b = gpu::device_memory_in_use(ctx.dev);
    if (!b) return fail(std::string("the memory in use ") + phase, b.error());
    out = *b;
    return gpu::status::ok();
  };
  if (auto st = in_use("while training", f.in_use_training_bytes); !st) return st;
  for (int round = 0; round < 2; ++round) {  // the first pins the host memory, the second reuses it
    auto start = clock_type::now();
    if (auto st = engine.offload_state(); !st) return fail("offloading the training state", st);
    (round == 0 ? f.first_offload_ms : f.offload_ms) = ms_since(start);
    if (auto st = in_use("offloaded", f.in_use_offloaded_bytes); !st) return st;
    start = clock_type::now();
    if (auto st = engine.restore_state(); !st) return fail("restoring the training state", st);
    f.restore_ms = ms_since(start);
    if (auto st = in_use("restored", f.in_use_restored_bytes); !st) return st;
  }
  f.offloaded_bytes = engine.memory().optimizer;
  auto r = engine.train_supervised_step({mb}, predicted);
  if (!r) return fail("the step after the restore", r.error());
  f.loss_after_restore = r->loss;
  return gpu::wait_for_device(ctx);
}

}  // namespace

gpu::result<train_bench_figures> run_train_bench(const train_bench_settings& s) {
  auto model = random_bench_model(s.model, s.weights, s.dev, s.seed);
  if (!model) return model.error();
  const gpu::model_config c = model->source.config;  // copies: the source moves into the engine
  const gpu::model_layout layout = model->source.layout;
  gpu::exec_context ctx;
  ctx.dev = s.dev;
  gpu::train_engine_options o;
  o.recompute = s.recompute;
  o.logprob_chunk_rows = s.logprob_chunk;
  o.adamw.lr = 1e-6;
  o.adamw.weight_decay = 0.01;
  if (s.bf16_optimizer) o.master_dtype = o.first_moment_dtype = o.second_moment_dtype = gpu::dtype::bfloat16;
  auto engine = gpu::gemma4_train_engine::create_with_weights(ctx, std::move(model->source), std::move(model->weights), o);
  if (!engine) return engine.error();

  std::mt19937_64 rng(s.seed);
  gpu::train_engine::supervised_micro_batch mb;
  mb.sequences.offsets.push_back(0);
  for (std::int64_t q = 0; q < s.micro_batch; ++q) {
    for (std::int64_t t = 0; t < s.tokens; ++t)
      mb.sequences.tokens.push_back(static_cast<std::int32_t>(rng() % static_cast<std::uint64_t>(c.vocab_size)));
    mb.sequences.offsets.push_back(static_cast<std::int32_t>(mb.sequences.tokens.size()));
  }
  const std::int64_t tokens = s.tokens * s.micro_batch, predicted = (s.tokens - 1) * s.micro_batch;

  train_bench_figures f;
  f.parameters = layout.parameter_count;
  std::vector<double> times;
  const std::int64_t live = gpu::device_buffer_live_bytes(s.dev);
  for (int step = 0; step < s.warmup + s.steps; ++step) {
    if (step == s.warmup) {
      gpu::reset_device_buffer_peak(s.dev);
      if (s.profile) gpu::op_profile_start();
    }
    const auto start = clock_type::now();
    auto r = (*engine)->train_supervised_step({mb}, predicted);
    if (!r) return fail("step " + std::to_string(step), r.error());
    if (auto st = gpu::wait_for_device(ctx); !st) return fail("step " + std::to_string(step), st);
    gpu::op_profile_mark(ctx, "(host, between steps)");
    if (step >= s.warmup) times.push_back(std::chrono::duration<double>(clock_type::now() - start).count() * 1e3);
    if (step == 0) f.first_loss = r->loss;
    f.last_loss = r->loss;
  }
  f.activation_peak_bytes = gpu::device_buffer_peak_bytes(s.dev) - live;
  if (s.profile) {
    auto p = gpu::op_profile_stop(ctx);
    if (!p) return fail("the op profile", p.error());
    f.profile = std::move(*p);
  }
  const auto memory = (*engine)->memory();
  f.weights_bytes = memory.weights;
  f.gradients_bytes = memory.gradients;
  f.optimizer_bytes = memory.optimizer;
  f.scratch_bytes = memory.scratch_high_water;
  if (auto st = memory_by_phase(ctx, **engine, mb, predicted, f); !st) return st;
  std::sort(times.begin(), times.end());
  f.step_ms_median = times[times.size() / 2];
  f.step_ms_mean = std::accumulate(times.begin(), times.end(), 0.0) / static_cast<double>(times.size());
  f.tokens_per_s = static_cast<double>(tokens) / (f.step_ms_median / 1e3);
  f.flops_per_step = 3 * gpu::forward_flops(c, layout, s.micro_batch, s.tokens);
  f.model_tflops = f.flops_per_step / (f.step_ms_median / 1e3) / 1e12;

  // The ceiling: the step's products back to back, with their own scratch (cuBLASLt's workspace),
  // as the engine's ops have theirs.
  gpu::workspace ceiling_scratch(s.dev);
  gpu::exec_context ceiling_ctx = ctx;
  ceiling_ctx.scratch = &ceiling_scratch;
  auto ceiling_s = gemm_ceiling_seconds(ceiling_ctx, s.weights, step_gemms(c, layout, tokens), true);
  if (!ceiling_s) return fail("the GEMM ceiling", ceiling_s.error());
  f.gemm_ceiling_ms = *ceiling_s * 1e3;
  f.ceiling_fraction = f.gemm_ceiling_ms / f.step_ms_median;
  return f;
}

}  // namespace tandem::cli
