// The host link's bandwidth (host_link.h).
#include "gpu/core/host_link.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "gpu/core/memory.h"

namespace tandem::gpu {

result<host_link_figures> measure_host_link(const exec_context& ctx, std::int64_t bytes, int rounds) {
  if (bytes <= 0 || rounds < 1)
    return status{status_code::invalid_argument, "measure_host_link: bytes " + std::to_string(bytes) + " and rounds " +
                                                     std::to_string(rounds) + " must be positive"};
  auto host = host_staging_allocate(ctx.dev, bytes);
  if (!host) return status{host.error().code(), "measure_host_link: pinned host memory: " + host.error().message()};
  const std::unique_ptr<void, std::function<void(void*)>> host_owner(*host, [&](void* p) { host_staging_free(ctx.dev, p); });
  auto dev = device_allocate(ctx.dev, bytes);
  if (!dev) return status{dev.error().code(), "measure_host_link: device memory: " + dev.error().message()};
  const std::unique_ptr<void, std::function<void(void*)>> dev_owner(*dev, [&](void* p) { device_free(ctx.dev, p); });
  using clock = std::chrono::steady_clock;
  double best_in = 0, best_out = 0;
  for (int r = 0; r < rounds; ++r) {
    auto start = clock::now();
    if (status s = copy_to_device(ctx, *dev, *host, bytes); !s) return status{s.code(), "measure_host_link: to the device: " + s.message()};
    best_in = std::max(best_in, static_cast<double>(bytes) / std::chrono::duration<double>(clock::now() - start).count());
    start = clock::now();
    if (status s = copy_to_host(ctx, *host, *dev, bytes); !s) return status{s.code(), "measure_host_link: to the host: " + s.message()};
    best_out = std::max(best_out, static_cast<double>(bytes) / std::chrono::duration<double>(clock::now() - start).count());
  }
  return host_link_figures{best_in / 1e9, best_out / 1e9};
}

}  // namespace tandem::gpu
