// --backend and --dtype of the model commands (compute_choice.h).
#include "tools/cli/compute_choice.h"

namespace tandem::cli {

std::string compute_choice::describe() const { return dev.to_string() + ", " + std::string(gpu::to_string(type)); }

std::optional<compute_choice> parse_compute_choice(const parsed_options& p, std::string& problem, bool& refused) {
  compute_choice c;
  refused = false;
  if (const auto it = p.values.find("--backend"); it != p.values.end()) {
    if (it->second != "cpu" && it->second != "cuda") {
      problem = "--backend '" + it->second + "': expected cpu or cuda";
      return std::nullopt;
    }
    if (it->second == "cuda") c.dev = gpu::device::cuda(0);
  }
  if (const auto it = p.values.find("--dtype"); it != p.values.end()) {
    if (it->second != "fp32" && it->second != "bf16") {
      problem = "--dtype '" + it->second + "': expected fp32 or bf16";
      return std::nullopt;
    }
    if (it->second == "bf16") c.type = gpu::dtype::bfloat16;
  }
  if (c.dev.is_cpu() && c.type == gpu::dtype::bfloat16) {
    problem = "--dtype bf16 runs on --backend cuda: the CPU computes in float32";
    refused = true;
    return std::nullopt;
  }
  return c;
}

}  // namespace tandem::cli
