// A point in a stream's work that the host can wait for, without waiting for what was enqueued
// after it: a step enqueued behind another can run while the host reads the first one's results.
//
//   place(ctx) --> placed --wait()--> passed (the device has done everything enqueued before it)
//
// On CUDA an event recorded on ctx.stream; on the CPU, whose work is done when enqueued, a marker
// is passed when placed. Move-only; not thread-safe.
#pragma once

#include "gpu/core/device.h"
#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"

namespace tandem::gpu {

class stream_marker {
 public:
  stream_marker() = default;
  stream_marker(stream_marker&& other) noexcept;
  stream_marker& operator=(stream_marker&& other) noexcept;
  stream_marker(const stream_marker&) = delete;
  stream_marker& operator=(const stream_marker&) = delete;
  ~stream_marker();

  /// A marker after the work enqueued on ctx.stream so far.
  static result<stream_marker> place(const exec_context& ctx);
  /// Returns once the device has passed the marker (a counted host wait on CUDA); the device's
  /// error if its work failed. A marker waited for, or never placed, returns at once.
  status wait();

 private:
  device dev_ = device::cpu();
  void* event_ = nullptr;  // cudaEvent_t while placed on CUDA and not yet waited for
};

}  // namespace tandem::gpu
