// Captured work (captured_work.h): the CPU's replay and the dispatch to the CUDA graph calls.
#include "gpu/core/captured_work.h"

#include <string>

namespace tandem::gpu {

namespace internal {
#if TANDEM_HAVE_CUDA
result<void*> cuda_capture(int index, const std::function<status(void* stream)>& work);  // a graph exec
status cuda_replay(int index, void* stream, void* graph_exec);
void cuda_destroy_graph(void* graph_exec);
#endif
}  // namespace internal

struct captured_work::state {
  device dev;
  work_fn work;              // the CPU's: run again on replay
  void* graph_exec = nullptr;  // CUDA's
  ~state() {
#if TANDEM_HAVE_CUDA
    if (graph_exec) internal::cuda_destroy_graph(graph_exec);
#endif
  }
};

result<captured_work> captured_work::capture(const exec_context& ctx, work_fn work) {
  captured_work out;
  out.state_ = std::make_shared<state>();
  out.state_->dev = ctx.dev;
  if (ctx.dev.is_cpu()) {
    out.state_->work = std::move(work);
    return out;
  }
#if TANDEM_HAVE_CUDA
  auto exec = internal::cuda_capture(ctx.dev.index, [&](void* stream) {
    exec_context captured = ctx;
    captured.stream.native = stream;
    return work(captured);
  });
  if (!exec) return exec.error();
  out.state_->graph_exec = *exec;
  return out;
#else
  return status(status_code::unsupported, "captured_work: this build has no CUDA backend (capture on " + ctx.dev.to_string() + ")");
#endif
}

status captured_work::replay(const exec_context& ctx) const {
  if (!state_) return status(status_code::invalid_argument, "captured_work: replay of nothing captured");
  if (ctx.dev != state_->dev)
    return status(status_code::invalid_argument, "captured_work: captured on " + state_->dev.to_string() + ", replayed on " +
                                                     ctx.dev.to_string());
  if (ctx.dev.is_cpu()) return state_->work(ctx);
#if TANDEM_HAVE_CUDA
  return internal::cuda_replay(ctx.dev.index, ctx.stream.native, state_->graph_exec);
#else
  return status(status_code::unsupported, "captured_work: this build has no CUDA backend");
#endif
}

}  // namespace tandem::gpu
