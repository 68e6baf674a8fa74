// `tandem logprobs --trace FILE`: every activation the model's forward names (gpu/core/trace.h)
// copied to the host as float32 while it is valid, then written to FILE as safetensors: "NAME"
// outside a layer ("embed", "ple", "final_norm"), "layers.L.NAME" inside layer L ("layer_out",
// "attn_out", ...). With transformers' activations of the same model in float64, a script finds
// the first layer where a path drifts (tools/reference/trace_drift.py). Meant for a few short
// sequences: every activation of every layer is kept.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"
#include "gpu/core/trace.h"

namespace tandem::cli {

class trace_dump final : public gpu::trace_sink {
 public:
  /// Records tensors on ctx's device (read after the work enqueued on its stream).
  explicit trace_dump(const gpu::exec_context& ctx) : ctx_(ctx) {}

  void record(std::string_view name, int layer, const gpu::tensor& value) override;

  /// Writes every recorded activation to `path` (which must not exist), in recording order; the
  /// first failure of a record (a tensor that could not be read) instead, naming the activation.
  gpu::status write(const std::filesystem::path& path) const;
  std::size_t size() const { return kept_.size(); }

 private:
  struct kept {
    std::string key;
    std::vector<std::int64_t> shape;
    std::vector<float> values;
  };
  gpu::exec_context ctx_;
  std::vector<kept> kept_;
  gpu::status first_error_ = gpu::status::ok();
};

}  // namespace tandem::cli
