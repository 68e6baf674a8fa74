// The workspace's growth and the context's device check (exec_context.h).
#include "gpu/core/exec_context.h"

#include <string>

#include "gpu/core/memory.h"

namespace tandem::gpu {

result<std::span<std::byte>> workspace::scratch(std::string_view who, std::size_t bytes) {
  if (bytes > capacity_) {
    auto fresh = device_allocate(device_, static_cast<std::int64_t>(bytes));
    if (!fresh)
      return status{status_code::out_of_memory, std::string(who) + ": workspace of " + device_.to_string() +
                                                    ": cannot grow to " + std::to_string(bytes) +
                                                    " bytes: " + fresh.error().message()};
    trim();
    data_ = *fresh;
    capacity_ = bytes;
  }
  if (bytes > high_water_) high_water_ = bytes;
  return std::span<std::byte>(static_cast<std::byte*>(data_), bytes);
}

void workspace::trim() {
  if (data_) device_free(device_, data_);
  data_ = nullptr;
  capacity_ = 0;
}

status exec_context::expect_device(std::string_view op, std::string_view what, const device& where) const {
  if (where == dev) return status::ok();
  return {status_code::invalid_argument, std::string(op) + ": " + std::string(what) + " is on " + where.to_string() +
                                             ", but the call runs on " + dev.to_string()};
}

}  // namespace tandem::gpu
