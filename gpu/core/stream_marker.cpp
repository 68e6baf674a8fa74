// Stream markers (stream_marker.h): CUDA events recorded on the stream, nothing on the CPU.
#include "gpu/core/stream_marker.h"

#include <utility>

namespace tandem::gpu {
namespace internal {
#if TANDEM_HAVE_CUDA
result<void*> cuda_record_event(int index, void* stream);  // cuda/events.cpp
status cuda_wait_event(void* event);                       // a counted host wait
void cuda_destroy_event(void* event);
#endif
}  // namespace internal

stream_marker::stream_marker(stream_marker&& other) noexcept
    : dev_(other.dev_), event_(std::exchange(other.event_, nullptr)) {}

stream_marker& stream_marker::operator=(stream_marker&& other) noexcept {
  if (this != &other) {
    this->~stream_marker();
    dev_ = other.dev_;
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}

stream_marker::~stream_marker() {
#if TANDEM_HAVE_CUDA
  if (event_) internal::cuda_destroy_event(event_);
#endif
  event_ = nullptr;
}

result<stream_marker> stream_marker::place(const exec_context& ctx) {
  stream_marker m;
  m.dev_ = ctx.dev;
  if (ctx.dev.is_cpu()) return m;
#if TANDEM_HAVE_CUDA
  auto e = internal::cuda_record_event(ctx.dev.index, ctx.stream.native);
  if (!e) return e.error();
  m.event_ = *e;
  return m;
#else
  return status{status_code::unsupported, "this build has no CUDA backend"};
#endif
}

status stream_marker::wait() {
  if (!event_) return status::ok();
#if TANDEM_HAVE_CUDA
  const status s = internal::cuda_wait_event(event_);
  internal::cuda_destroy_event(event_);
  event_ = nullptr;
  return s;
#else
  return status::ok();
#endif
}

}  // namespace tandem::gpu
