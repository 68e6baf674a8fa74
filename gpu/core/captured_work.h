// Work captured once from a context and replayed as a whole: on CUDA a graph (the ops recorded
// from a stream of its own and launched with one call), so replaying costs the host one launch
// however many kernels and library calls the work makes; on the CPU, where nothing is enqueued,
// replay runs the work again.
//
//   capture(ctx, work): work(ctx') runs with ctx' = ctx on a capturing stream; nothing executes
//     --> replay(ctx): the recorded work, in order, on ctx.stream --> replay(ctx) ... --> destroyed
//
// What the work may do while captured: enqueue ops on the stream it is given. It must not wait
// for the device, copy to or from pageable host memory, or grow a workspace (run it once before
// capturing, so every buffer, scratch span and library plan it needs exists); a capture that
// breaks these rules fails with the work's or the driver's error. Every pointer the work used
// (buffers, ctx.scratch) must stay valid, and unchanged in size, while the capture is replayed.
#pragma once

#include <functional>
#include <memory>

#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"

namespace tandem::gpu {

class captured_work {
 public:
  using work_fn = std::function<status(const exec_context&)>;

  /// Captures `work` on ctx.dev. device_error naming the failing call when the device refuses
  /// the capture; the work's own error when it fails while captured.
  static result<captured_work> capture(const exec_context& ctx, work_fn work);

  /// Runs what was captured on ctx.stream (ctx.dev must be the capture's device).
  status replay(const exec_context& ctx) const;

 private:
  struct state;
  std::shared_ptr<state> state_;
};

}  // namespace tandem::gpu
