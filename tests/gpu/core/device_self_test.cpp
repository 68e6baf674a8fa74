// Runs the kernel self-test on every visible CUDA device; exits 77 (CTest: skipped) without one.
#include <cstdio>

#include "gpu/core/device_query.h"

int main() {
  const tandem::gpu::backend_info info = tandem::gpu::query_backend();
  if (info.devices.empty()) {
    std::printf("skipped: %s\n", info.device_problem.c_str());
    return 77;
  }
  int failures = 0;
  for (const auto& d : info.devices) {
    const tandem::gpu::status s = tandem::gpu::device_self_test(d.index);
    std::printf("cuda:%d %s: %s\n", d.index, d.name.c_str(), s ? "ok" : s.message().c_str());
    failures += s ? 0 : 1;
  }
  return failures == 0 ? 0 : 1;
}
