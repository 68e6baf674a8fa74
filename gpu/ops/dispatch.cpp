// The backend checks of dispatch.h.
#include "gpu/ops/dispatch.h"

#include "gpu/core/op_profile.h"
#include "gpu/ops/fault_injection.h"

namespace tandem::gpu::ops {

status cuda_not_built(std::string_view op, const device& dev) {
  return {status_code::unsupported, std::string(op) + ": this build has no CUDA backend (the call runs on " +
                                        dev.to_string() + "; build where nvcc and CUDA 13 are found)"};
}

status on_backend(const exec_context& ctx, std::string_view op, const tensor& x) {
  if (status s = ctx.expect_device(op, "the input", x.dev()); !s) return s;
  if (status s = injected_failure(op); !s) return s;
#if !TANDEM_HAVE_CUDA
  if (!ctx.dev.is_cpu()) return cuda_not_built(op, ctx.dev);
#endif
  op_profile_mark(ctx, op);
  return status::ok();
}

}  // namespace tandem::gpu::ops
