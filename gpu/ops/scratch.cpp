// Per-call scratch from the context's workspace or the heap (scratch.h).
#include "gpu/ops/scratch.h"

#include <new>
#include <string>

namespace tandem::gpu::ops {

result<op_scratch> op_scratch::get(const exec_context& ctx, std::string_view op, std::size_t bytes) {
  op_scratch out;
  if (ctx.scratch) {
    if (ctx.scratch->dev() != ctx.dev)
      return status{status_code::invalid_argument, std::string(op) + ": the context's workspace is on " +
                                                       ctx.scratch->dev().to_string() + ", the call runs on " +
                                                       ctx.dev.to_string()};
    auto s = ctx.scratch->scratch(op, bytes);
    if (!s) return s.error();
    out.span_ = *s;
    return out;
  }
  if (!ctx.dev.is_cpu())
    return status{status_code::unsupported, std::string(op) + ": scratch on " + ctx.dev.to_string() + " needs a workspace"};
  out.owned_.reset(new (std::nothrow) std::byte[bytes == 0 ? 1 : bytes]);
  if (!out.owned_)
    return status{status_code::out_of_memory, std::string(op) + ": cannot allocate " + std::to_string(bytes) + " bytes of scratch"};
  out.span_ = {out.owned_.get(), bytes};
  return out;
}

}  // namespace tandem::gpu::ops
