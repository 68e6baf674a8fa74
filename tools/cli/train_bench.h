// What `tandem bench train` measures: train steps of the Gemma 4 train engine over random initial
// weights of a config (forward, backward and AdamW of one micro-batch per step: the supervised
// next-token loss, as the Hugging Face peer trains), beside the GEMM-only ceiling of the same
// step (every matrix product of the step, forward, input gradient and weight gradient, through
// the linear op on the same device in the same dtype, measured in the same run), the model FLOPs
// of gpu/model/model_flops.h, and the memory the engine keeps (weights, gradients, optimizer
// state) apart from what one step adds (activations, scratch), and the memory in use by phase:
// training, offloaded for a colocated generation phase, restored.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "gpu/core/device.h"
#include "gpu/core/op_profile.h"
#include "gpu/core/status.h"
#include "gpu/model/activations.h"

namespace tandem::cli {

struct train_bench_settings {
  std::filesystem::path model;  ///< a directory with config.json (its weights, if any, are not read)
  std::int64_t tokens = 4096;   ///< tokens per sequence
  std::int64_t micro_batch = 1; ///< sequences per micro-batch (one micro-batch per step)
  int steps = 10, warmup = 2;
  gpu::recompute_mode recompute = gpu::recompute_mode::none;
  gpu::device dev = gpu::device::cpu();
  gpu::dtype weights = gpu::dtype::float32;  ///< the weights' and gradients' storage (bfloat16: CUDA)
  bool bf16_optimizer = false;  ///< bfloat16 master weights and moments (else float32)
  std::uint64_t seed = 1;
  /// Tokens whose vocabulary logits exist at once: the recipes' policy.logprob_chunk_size, whose
  /// default this is.
  std::int64_t logprob_chunk = 1024;
  bool profile = false;  ///< time the ops of the timed steps (gpu/core/op_profile.h)
};

struct train_bench_figures {
  std::int64_t parameters = 0;
  double step_ms_median = 0, step_ms_mean = 0;
  double tokens_per_s = 0;
  double flops_per_step = 0, model_tflops = 0;
  double gemm_ceiling_ms = 0;      ///< the step's matrix products alone
  double ceiling_fraction = 0;     ///< gemm_ceiling_ms / step_ms_median
  double first_loss = 0, last_loss = 0;
  std::int64_t weights_bytes = 0, gradients_bytes = 0, optimizer_bytes = 0;  ///< fixed memory
  std::int64_t activation_peak_bytes = 0;  ///< the most a step held in activations at once
  std::int64_t scratch_bytes = 0;          ///< the engine's scratch workspace at its most
  /// Memory by phase, after the timed steps: the device's memory in use (device_memory_in_use)
  /// right after a step, after offload_state() (optimizer state copied to pinned host memory,
  /// gradients and cached activations given back) and after restore_state(); how long each
  /// transition took, and the loss of one more step after the restore (the state came back). The
  /// in-use figures are -1 on the CPU, whose "device" memory is the host's.
  std::int64_t in_use_training_bytes = -1, in_use_offloaded_bytes = -1, in_use_restored_bytes = -1;
  std::int64_t offloaded_bytes = 0;  ///< the optimizer state held in host memory while offloaded
  /// The first offload pins its host memory; the second (as every later step of a colocated run)
  /// reuses it.
  double first_offload_ms = 0, offload_ms = 0, restore_ms = 0;
  double loss_after_restore = 0;
  /// With settings.profile: the timed steps' time by op, summed over the steps, most first (the
  /// host's time between steps under "(host, between steps)").
  std::vector<gpu::op_time> profile;
};

/// Runs the benchmark; an error names what failed (the config, the device, a step).
gpu::result<train_bench_figures> run_train_bench(const train_bench_settings& s);

}  // namespace tandem::cli
