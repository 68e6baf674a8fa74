// Where and in what the model commands compute (`tandem logprobs`, `tandem loss`):
// --backend cpu|cuda (default cpu; cuda is cuda:0) and --dtype fp32|bf16 (default fp32: the
// weights' and activations' storage; bf16 runs on CUDA only, the CPU computing in float32).
#pragma once

#include <optional>
#include <string>

#include "gpu/core/device.h"
#include "gpu/core/dtype.h"
#include "gpu/core/exec_context.h"
#include "tools/cli/arguments.h"

namespace tandem::cli {

struct compute_choice {
  gpu::device dev = gpu::device::cpu();
  gpu::dtype type = gpu::dtype::float32;
  /// "cpu, float32", "cuda:0, bfloat16".
  std::string describe() const;
  /// The context of the command's work: this device, its default stream, `scratch` (on this device).
  gpu::exec_context context(gpu::workspace& scratch) const { return {dev, {}, &scratch}; }
};

/// The choice of p's --backend and --dtype. nullopt with `problem` set: a value outside the lists
/// (a usage error), or bf16 on the CPU (`refused` set: the combination is not built).
std::optional<compute_choice> parse_compute_choice(const parsed_options& p, std::string& problem, bool& refused);

}  // namespace tandem::cli
