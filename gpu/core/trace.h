// Naming intermediate activations: model code calls trace(t, "attn_out", layer) at every step of
// the forward; without a sink it costs a branch. A test sink copies what it is shown and compares
// it with the Hugging Face reference saved under the same (name, layer), so the first diverging
// activation is obvious.
#pragma once

#include <string_view>

#include "gpu/core/tensor.h"

namespace tandem::gpu {

class trace_sink {
 public:
  virtual ~trace_sink() = default;
  /// Sees `value` (on its device) while it is valid; copy it to keep it. layer -1: not in a layer.
  virtual void record(std::string_view name, int layer, const tensor& value) = 0;
};

class tracer {
 public:
  tracer() = default;
  explicit tracer(trace_sink* sink) : sink_(sink) {}

  void operator()(const tensor& value, std::string_view name, int layer = -1) const {
    if (sink_) sink_->record(name, layer, value);
  }
  bool enabled() const { return sink_ != nullptr; }

 private:
  trace_sink* sink_ = nullptr;
};

}  // namespace tandem::gpu
