// Slab allocation and its release / offload / restore transitions.
#include "gpu/core/slab.h"

#include <utility>
#include <vector>

#include "gpu/core/memory.h"

namespace tandem::gpu {

result<slab> slab::create(std::string name, std::int64_t bytes, device dev) {
  if (bytes < 0) return status{status_code::invalid_argument, "slab " + name + ": negative size"};
  auto mem = device_allocate(dev, bytes);
  if (!mem) return status{mem.error().code(), "slab " + name + " (" + std::to_string(bytes) + " bytes on " +
                                                  dev.to_string() + "): " + mem.error().message()};
  slab s;
  s.name_ = std::move(name);
  s.bytes_ = bytes;
  s.device_ = dev;
  s.data_ = *mem;
  s.state_ = slab_state::resident;
  return s;
}

slab::slab(slab&& o) noexcept { *this = std::move(o); }

slab& slab::operator=(slab&& o) noexcept {
  if (this != &o) {
    free_all();
    name_ = std::move(o.name_);
    bytes_ = o.bytes_;
    device_ = o.device_;
    state_ = o.state_;
    data_ = std::exchange(o.data_, nullptr);
    host_ = std::exchange(o.host_, nullptr);
    o.state_ = slab_state::released;
  }
  return *this;
}

slab::~slab() { free_all(); }

void slab::free_all() {
  device_free(device_, data_);
  host_staging_free(device_, host_);
  data_ = host_ = nullptr;
}

status slab::check_range(std::int64_t byte_offset, std::int64_t bytes) const {
  if (state_ != slab_state::resident)
    return {status_code::invalid_argument, "slab " + name_ + ": not resident (released or offloaded)"};
  if (byte_offset < 0 || bytes < 0 || byte_offset + bytes > bytes_)
    return {status_code::invalid_argument, "slab " + name_ + ": view of " + std::to_string(bytes) + " bytes at " +
                                               std::to_string(byte_offset) + " exceeds its " +
                                               std::to_string(bytes_) + " bytes"};
  return status::ok();
}

result<tensor> slab::view(std::int64_t byte_offset, dtype type, std::initializer_list<std::int64_t> shape) const {
  return view_of(byte_offset, type, std::vector<std::int64_t>(shape));
}

status slab::release() {
  if (state_ == slab_state::released) return status::ok();
  free_all();
  state_ = slab_state::released;
  return status::ok();
}

status slab::offload() {
  if (state_ != slab_state::resident)
    return {status_code::invalid_argument, "slab " + name_ + ": offload() needs a resident slab"};
  if (!host_) {
    auto host = host_staging_allocate(device_, bytes_);
    if (!host) return {host.error().code(), "slab " + name_ + ": offload: " + host.error().message()};
    host_ = *host;
  }
  if (status s = copy_to_host(device_, host_, data_, bytes_); !s) return {s.code(), "slab " + name_ + ": offload: " + s.message()};
  device_free(device_, data_);
  data_ = nullptr;
  state_ = slab_state::offloaded;
  return status::ok();
}

status slab::restore() {
  if (state_ == slab_state::resident) return status::ok();
  auto mem = device_allocate(device_, bytes_);
  if (!mem) return {mem.error().code(), "slab " + name_ + ": restore: " + mem.error().message()};
  if (state_ == slab_state::offloaded) {
    if (status s = copy_to_device(device_, *mem, host_, bytes_); !s) {
      device_free(device_, *mem);
      return {s.code(), "slab " + name_ + ": restore: " + s.message()};
    }
  }
  data_ = *mem;
  state_ = slab_state::resident;
  return status::ok();
}

}  // namespace tandem::gpu
