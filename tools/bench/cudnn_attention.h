// cuDNN's fused attention (SDPA, through the cudnn frontend's graph API) on one bf16 sequence in
// the [tokens, heads, d] layout of attention_forward: the peer that cuda_ops_bench measures our
// attention against in the same run. Built only where the frontend's headers were found
// (TANDEM_HAVE_CUDNN_FRONTEND); cudnn_attention_available() says why not otherwise.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "gpu/core/status.h"

namespace tandem::bench {

/// "" when built with cuDNN attention, else the reason it is not.
std::string cudnn_attention_unavailable();

/// One problem's forward and backward graphs, built once, with their buffers; run() enqueues on
/// the default stream. q, k, v, o, do: bf16; the statistics float32.
class cudnn_attention {
 public:
  struct shape {
    std::int64_t tokens, heads, kv_heads, d, window;  ///< window 0: causal
  };
  /// The plans for `s`, or the reason cuDNN declines its forward. A backward cuDNN declines
  /// (head_dim 512 on Hopper, say) leaves the forward: backward_status() says why.
  static gpu::result<std::unique_ptr<cudnn_attention>> make(const shape& s);
  virtual ~cudnn_attention() = default;
  virtual gpu::status forward() = 0;
  virtual gpu::status backward() = 0;  ///< backward_status() when cuDNN declined it
  /// ok when the backward was built, else the reason cuDNN gave.
  virtual gpu::status backward_status() const = 0;
};

}  // namespace tandem::bench
