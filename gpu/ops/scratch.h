// Scratch memory for one op call: taken from the context's workspace when it has one (so an op in
// a hot loop allocates nothing), else owned by the call. Contents are unspecified.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string_view>

#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"

namespace tandem::gpu::ops {

class op_scratch {
 public:
  /// `bytes` of scratch on the context's device (host memory on the CPU); out_of_memory naming
  /// `op` when it cannot be had.
  static result<op_scratch> get(const exec_context& ctx, std::string_view op, std::size_t bytes);

  std::byte* data() const { return span_.data(); }
  std::size_t size() const { return span_.size(); }

 private:
  std::span<std::byte> span_;
  std::shared_ptr<std::byte[]> owned_;  // when the context has no workspace
};

}  // namespace tandem::gpu::ops
