// CUDA graphs for captured_work (captured_work.h): the work recorded from a stream of its own in
// thread-local capture mode, instantiated once, launched on the caller's stream.
#include <cuda_runtime_api.h>

#include <functional>

#include "gpu/core/cuda/check.h"
#include "gpu/core/status.h"

namespace tandem::gpu::internal {

result<void*> cuda_capture(int index, const std::function<status(void* stream)>& work) {
  TANDEM_CUDA_CHECK(cudaSetDevice(index));
  cudaStream_t stream = nullptr;
  TANDEM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  struct stream_guard {
    cudaStream_t s;
    ~stream_guard() { cudaStreamDestroy(s); }
  } guard{stream};
  TANDEM_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  const status worked = work(stream);
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream, &graph);  // ends the capture whatever the work did
  struct graph_guard {
    cudaGraph_t g;
    ~graph_guard() {
      if (g) cudaGraphDestroy(g);
    }
  } owned{graph};
  if (!worked || ended != cudaSuccess) {
    (void)cudaGetLastError();  // the failed capture's error is this call's to report, not the next op's
    if (!worked) return worked;
    return cuda_status(ended, "cudaStreamEndCapture", __FILE__, __LINE__);
  }
  cudaGraphExec_t exec = nullptr;
  TANDEM_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  return static_cast<void*>(exec);
}

status cuda_replay(int index, void* stream, void* graph_exec) {
  TANDEM_CUDA_CHECK(cudaSetDevice(index));
  TANDEM_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph_exec), static_cast<cudaStream_t>(stream)));
  return status::ok();
}

void cuda_destroy_graph(void* graph_exec) { cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph_exec)); }

}  // namespace tandem::gpu::internal
