// One enqueued copy of a step's small host-built arrays (upload_batch.h).
#include "gpu/core/upload_batch.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "gpu/core/memory.h"

namespace tandem::gpu {

upload_batch::~upload_batch() {
  // A batch still in flight would be read by the device after the free: the owner's stream is
  // unknown here, so the whole device is waited for (only after a failed step).
  if (in_flight_) {
    exec_context ctx;
    ctx.dev = dev_;
    (void)wait_for_device(ctx);
  }
  if (staging_) host_staging_free(dev_, staging_);
}

status upload_batch::begin(const exec_context& ctx) {
  if (in_flight_)
    if (status s = wait_for_device(ctx); !s) return s;
  in_flight_ = false;
  used_ = 0;
  entries_.clear();
  sent_ = device_buffer{};
  return status::ok();
}

status upload_batch::reserve(std::int64_t elements) {
  if (elements <= capacity_) return status::ok();
  const std::int64_t grown = std::max(elements, 2 * capacity_ + 1024);
  auto fresh = host_staging_allocate(dev_, grown * 4);
  if (!fresh) return fresh.error();
  auto* p = static_cast<std::int32_t*>(*fresh);
  if (used_ > 0) std::memcpy(p, staging_, static_cast<std::size_t>(used_) * 4);
  if (staging_) host_staging_free(dev_, staging_);  // not in flight: begin() saw to that
  staging_ = p;
  capacity_ = grown;
  return status::ok();
}

result<std::size_t> upload_batch::add(std::span<const std::int32_t> values, std::vector<std::int64_t> shape) {
  std::int64_t count = 1;
  for (const std::int64_t d : shape) count *= d;
  if (count != static_cast<std::int64_t>(values.size()))
    return status(status_code::invalid_argument, "upload_batch::add: " + std::to_string(values.size()) +
                                                     " values for a shape of " + std::to_string(count) + " elements");
  if (in_flight_ || !sent_.empty())
    return status(status_code::invalid_argument, "upload_batch::add: the batch was sent (begin() a new one)");
  const std::int64_t offset = (used_ + 3) / 4 * 4;
  if (status s = reserve(offset + count); !s) return s;
  if (count > 0) std::memcpy(staging_ + offset, values.data(), values.size() * 4);
  used_ = offset + count;
  entries_.push_back({offset, std::move(shape)});
  return entries_.size() - 1;
}

status upload_batch::send(const exec_context& ctx) {
  if (ctx.dev != dev_)
    return status(status_code::invalid_argument, "upload_batch::send: the staging is for " + dev_.to_string() + ", the context runs on " +
                                                     ctx.dev.to_string());
  auto buffer = device_buffer::unfilled(ctx, dtype::int32, {std::max<std::int64_t>(used_, 1)});
  if (!buffer) return buffer.error();
  sent_ = std::move(*buffer);
  if (used_ == 0) return status::ok();
  if (status s = enqueue_copy_to_device(ctx, sent_.data<std::int32_t>(), staging_, used_ * 4); !s) return s;
  in_flight_ = true;
  return status::ok();
}

tensor upload_batch::host(std::size_t i) const {
  const entry& e = entries_.at(i);
  return tensor::contiguous(staging_ + e.offset, dtype::int32, e.shape, device::cpu());
}

tensor upload_batch::on_device(std::size_t i) const {
  const entry& e = entries_.at(i);
  return tensor::contiguous(sent_.data<std::int32_t>() + e.offset, dtype::int32, e.shape, dev_);
}

}  // namespace tandem::gpu
