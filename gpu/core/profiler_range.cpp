// The profiler's collection range (profiler_range.h): the CPU's nothing, and the dispatch to CUDA.
#include "gpu/core/profiler_range.h"

namespace tandem::gpu {

namespace internal {
#if TANDEM_HAVE_CUDA
status cuda_profiler_range(int index, bool start);
#endif
}  // namespace internal

namespace {

status range(device dev, bool start) {
  if (dev.is_cpu()) return status::ok();
#if TANDEM_HAVE_CUDA
  return internal::cuda_profiler_range(dev.index, start);
#else
  return status(status_code::unsupported, "profiler range on " + dev.to_string() + ": this build has no CUDA backend");
#endif
}

}  // namespace

status profiler_range_start(device dev) { return range(dev, true); }
status profiler_range_stop(device dev) { return range(dev, false); }

}  // namespace tandem::gpu
