// capture_branch (captured_branch.h): an if/else conditional node added to the graph being
// captured, its bodies captured from a side stream into the node's own graphs.
#include "gpu/ops/cuda/captured_branch.h"

#include <string>

#include "gpu/core/cuda/check.h"
#include "gpu/ops/op_check.h"

namespace tandem::gpu::ops::cuda {
namespace {

/// A stream for the bodies' captures, destroyed on every path out.
struct side_stream {
  cudaStream_t s = nullptr;
  side_stream() = default;
  side_stream(const side_stream&) = delete;
  side_stream& operator=(const side_stream&) = delete;
  ~side_stream() {
    if (s) cudaStreamDestroy(s);
  }
};

/// Captures work(ctx on `side`) into `body` (a conditional node's graph, empty).
status capture_body(const exec_context& ctx, std::string_view op, cudaStream_t side, cudaGraph_t body,
                    const branch_work& work) {
  TANDEM_CUDA_CHECK(cudaStreamBeginCaptureToGraph(side, body, nullptr, nullptr, 0, cudaStreamCaptureModeThreadLocal));
  exec_context inner = ctx;
  inner.stream.native = side;
  const status worked = work(inner);
  cudaGraph_t captured = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(side, &captured);  // ends it whatever the work did
  if (!worked) {
    (void)cudaGetLastError();
    return worked;
  }
  if (ended != cudaSuccess) return internal::cuda_status(ended, "cudaStreamEndCapture (a branch's body)", __FILE__, __LINE__);
  if (captured != body)
    return {status_code::device_error, std::string(op) + ": a branch's body was captured into another graph"};
  return status::ok();
}

}  // namespace

result<bool> capturing(const exec_context& ctx) {
  cudaStreamCaptureStatus s = cudaStreamCaptureStatusNone;
  TANDEM_CUDA_CHECK(cudaStreamIsCapturing(static_cast<cudaStream_t>(ctx.stream.native), &s));
  return s != cudaStreamCaptureStatusNone;
}

status capture_branch(const exec_context& ctx, std::string_view op,
                      const std::function<status(cudaGraphConditionalHandle)>& decide, const branch_work& when_set,
                      const branch_work& otherwise) {
  const auto stream = static_cast<cudaStream_t>(ctx.stream.native);
  cudaStreamCaptureStatus state = cudaStreamCaptureStatusNone;
  cudaGraph_t graph = nullptr;
  TANDEM_CUDA_CHECK(cudaStreamGetCaptureInfo(stream, &state, nullptr, &graph));
  if (state != cudaStreamCaptureStatusActive)
    return {status_code::invalid_argument, std::string(op) + ": capture_branch outside a stream capture"};
  cudaGraphConditionalHandle handle = 0;
  TANDEM_CUDA_CHECK(cudaGraphConditionalHandleCreate(&handle, graph, 0, cudaGraphCondAssignDefault));
  TANDEM_RETURN_IF_ERROR(decide(handle));
  // The node depends on what the capture's next node would (the deciding kernel, last).
  const cudaGraphNode_t* dependencies = nullptr;
  const cudaGraphEdgeData* edges = nullptr;
  std::size_t count = 0;
  TANDEM_CUDA_CHECK(cudaStreamGetCaptureInfo(stream, &state, nullptr, &graph, &dependencies, &edges, &count));
  cudaGraphNodeParams params{};
  params.type = cudaGraphNodeTypeConditional;
  params.conditional.handle = handle;
  params.conditional.type = cudaGraphCondTypeIf;
  params.conditional.size = 2;  // [0] when nonzero, [1] else
  cudaGraphNode_t node = nullptr;
  TANDEM_CUDA_CHECK(cudaGraphAddNode(&node, graph, dependencies, edges, count, &params));
  cudaGraph_t bodies[2] = {params.conditional.phGraph_out[0], params.conditional.phGraph_out[1]};
  side_stream side;
  TANDEM_CUDA_CHECK(cudaStreamCreateWithFlags(&side.s, cudaStreamNonBlocking));
  TANDEM_RETURN_IF_ERROR(capture_body(ctx, op, side.s, bodies[0], when_set));
  TANDEM_RETURN_IF_ERROR(capture_body(ctx, op, side.s, bodies[1], otherwise));
  TANDEM_CUDA_CHECK(cudaStreamUpdateCaptureDependencies(stream, &node, nullptr, 1, cudaStreamSetCaptureDependencies));
  return status::ok();
}

}  // namespace tandem::gpu::ops::cuda
