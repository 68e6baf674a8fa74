// What `tandem bench generate` measures: one batch of sampled generations by the Gemma 4 generate
// engine over random initial weights of a config (B prompts of P random tokens, N new tokens each,
// no stop token, after a short warm-up run of the same batch), beside two ceilings of its decode
// step measured in the same run: the GEMM-only ceiling (the step's matrix products at B rows
// through the linear op, same device and dtype) and the memory roofline (the bytes a decode step
// must read, every weight and each sequence's visible K/V, over the device's copy bandwidth).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <vector>

#include "gpu/core/device.h"
#include "gpu/core/dtype.h"
#include "gpu/core/op_profile.h"
#include "gpu/core/status.h"
#include "gpu/ops/logprobs.h"
#include "tools/cli/generate_agreement.h"

namespace tandem::cli {

struct generate_bench_settings {
  std::filesystem::path model;       ///< a directory with config.json (its weights, if any, are not read)
  std::int64_t batch = 256;          ///< sequences generated at once
  std::int64_t prompt_len = 128;     ///< random prompt tokens per sequence
  std::int64_t new_tokens = 256;     ///< tokens generated per sequence (no stop token)
  gpu::device dev = gpu::device::cpu();
  gpu::dtype weights = gpu::dtype::float32;  ///< weights, activations and KV cache (bfloat16: CUDA)
  /// transformers' generate() defaults when it samples: temperature 1, top-k 50, top-p 1.
  gpu::ops::sampling_params sampling{1.0, 50, 1.0};
  std::int64_t prefill_token_budget = 8192;  ///< prompt rows per engine step
  std::int64_t kv_block_size = 16;
  std::uint64_t seed = 1;
  bool profile = false;  ///< time the ops of the timed run's decode steps (gpu/core/op_profile.h)
  /// Enqueue a decode step before the last one's tokens are read (the engine's default); off: one
  /// step at a time, to measure what the overlap gives.
  bool overlap = true;
  /// Bracket the timed run's third decode step (the warm-up has captured its bucket, so a replayed
  /// one) with the CUDA profiler's collection range (gpu/core/profiler_range.h): `ncu
  /// --profile-from-start off` then times that step's kernels alone.
  bool profiler_range = false;
  /// After the ceilings, sample the batch again at these settings and score it with a train
  /// engine (generate_agreement.h).
  std::optional<gpu::ops::sampling_params> agreement;
};

struct generate_bench_figures {
  std::int64_t parameters = 0;
  std::int64_t weights_bytes = 0, kv_cache_bytes = 0;
  double total_ms = 0;             ///< the timed run, submit to the last token
  double tokens_per_s = 0;         ///< batch × new_tokens / total
  double prefill_ms = 0;           ///< steps that computed prompt rows (and sampled the first tokens)
  std::int64_t decode_steps = 0;   ///< steps of one row per running sequence
  double decode_step_ms_median = 0, decode_step_ms_mean = 0;
  double host_waits_per_decode_step = 0;  ///< the host's waits for the device (gpu/core/host_waits.h), mean
  std::int64_t overlapped_steps = 0;      ///< decode steps enqueued before the step before them was read back
  /// A decode step's time outside those waits, mean: the host enqueueing, including any time a
  /// launch stalls on the device's full launch queue (so not the host's own work alone).
  double decode_host_ms_mean = 0;
  double decode_gemm_ceiling_ms = 0;  ///< a decode step's products at `batch` rows
  double decode_bytes = 0;            ///< weights plus visible K/V read by a decode step, averaged over the run's steps
  double copy_gb_per_s = 0;           ///< device-to-device copy, bytes read plus written per second
  double roofline_ms = 0;             ///< decode_bytes at copy_gb_per_s
  double ceiling_fraction = 0, roofline_fraction = 0;  ///< each ceiling over the median decode step
  std::int64_t preemptions = 0;
  double mean_logprob = 0;         ///< of the sampled tokens (a sanity figure: random weights sample near-uniformly)
  /// With settings.profile: the decode steps' time by op after the first, summed, most first
  /// (each op charged until the next one starts), and how many steps that covers.
  std::vector<gpu::op_time> profile;
  std::int64_t profiled_steps = 0;
  std::optional<agreement_figures> agreement;  ///< with settings.agreement
};

/// Runs the benchmark; an error names what failed (the config, the device, a step).
gpu::result<generate_bench_figures> run_generate_bench(const generate_bench_settings& s);

}  // namespace tandem::cli
