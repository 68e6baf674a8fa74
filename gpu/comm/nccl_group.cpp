// The NCCL group (nccl_group.h): a non-blocking communicator, every call polled to completion
// with a deadline.
#include "gpu/comm/nccl_group.h"

#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#if TANDEM_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <nccl.h>
#endif

namespace tandem::gpu {

#if TANDEM_HAVE_CUDA

struct nccl_group::state {
  ncclComm_t comm = nullptr;
  status first_failure = status::ok();  // the group is unusable once it holds one
};

namespace {

using clock_type = std::chrono::steady_clock;

clock_type::time_point deadline_after(double seconds) {
  return clock_type::now() + std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(seconds));
}

status nccl_error(const std::string& what, ncclResult_t r, ncclComm_t comm) {
  std::string detail = ncclGetErrorString(r);
  if (const char* last = comm ? ncclGetLastError(comm) : nullptr; last && *last) detail += ": " + std::string(last);
  return {status_code::device_error, "nccl_group: " + what + ": " + detail};
}

result<ncclDataType_t> nccl_type(const char* op, dtype type, bool reduces) {
  switch (type) {
    case dtype::float32: return ncclFloat32;
    case dtype::float64: return ncclFloat64;
    case dtype::bfloat16: return ncclBfloat16;
    case dtype::float16: return ncclFloat16;
    case dtype::int32: return ncclInt32;
    case dtype::uint8:
      if (!reduces) return ncclUint8;
      return status(status_code::invalid_argument, std::string(op) + ": bytes (uint8) have no sum");
  }
  return status(status_code::invalid_argument, std::string(op) + ": no NCCL type for " + std::string(to_string(type)));
}

// Waits until `comm` is no longer initialising or enqueuing (ncclInProgress), failing after the
// deadline.
status settle(ncclComm_t comm, const std::string& what, clock_type::time_point deadline, double timeout_s) {
  for (;;) {
    ncclResult_t async = ncclSuccess;
    if (ncclResult_t r = ncclCommGetAsyncError(comm, &async); r != ncclSuccess) return nccl_error(what, r, comm);
    if (async == ncclSuccess) return status::ok();
    if (async != ncclInProgress) return nccl_error(what, async, comm);
    if (clock_type::now() > deadline)
      return {status_code::device_error,
              "nccl_group: " + what + ": timed out after " + std::to_string(timeout_s) + " s (a peer died or never joined)"};
    std::this_thread::yield();
  }
}

}  // namespace

nccl_group::nccl_group(const exec_context& ctx, int rank, int size, double timeout_s)
    : ctx_(ctx), rank_(rank), size_(size), timeout_s_(timeout_s), state_(std::make_unique<state>()) {}

nccl_group::~nccl_group() {
  if (!state_ || !state_->comm) return;
  // A healthy group finishes its work and leaves in order; a failed one (or one whose finalize
  // stalls) is aborted, which returns at once.
  if (state_->first_failure.is_ok()) {
    const ncclResult_t r = ncclCommFinalize(state_->comm);
    const auto deadline = deadline_after(10);
    if ((r == ncclSuccess || r == ncclInProgress) && settle(state_->comm, "finalize", deadline, 10).is_ok()) {
      ncclCommDestroy(state_->comm);
      return;
    }
  }
  ncclCommAbort(state_->comm);
}

result<nccl_unique_id> nccl_group::make_id() {
  ncclUniqueId id;
  if (ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess) return nccl_error("make_id", r, nullptr);
  nccl_unique_id out;
  static_assert(sizeof(id) == sizeof(out.bytes));
  std::memcpy(out.bytes.data(), &id, sizeof(id));
  return out;
}

result<std::unique_ptr<nccl_group>> nccl_group::create(const exec_context& ctx, const nccl_unique_id& id, int rank, int size,
                                                       double timeout_s) {
  if (ctx.dev.is_cpu()) return status(status_code::invalid_argument, "nccl_group: runs on a CUDA device, the context is the CPU");
  if (size < 1 || rank < 0 || rank >= size)
    return status(status_code::invalid_argument,
                  "nccl_group: rank " + std::to_string(rank) + " of " + std::to_string(size) + " is not a rank of the group");
  if (!(timeout_s > 0)) return status(status_code::invalid_argument, "nccl_group: the timeout must be positive");
  if (cudaError_t e = cudaSetDevice(ctx.dev.index); e != cudaSuccess)
    return status(status_code::device_error, "nccl_group: cudaSetDevice(" + std::to_string(ctx.dev.index) + "): " + cudaGetErrorString(e));
  std::unique_ptr<nccl_group> g(new nccl_group(ctx, rank, size, timeout_s));
  ncclUniqueId nid;
  std::memcpy(&nid, id.bytes.data(), sizeof(nid));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const std::string what = "joining as rank " + std::to_string(rank) + " of " + std::to_string(size);
  const ncclResult_t r = ncclCommInitRankConfig(&g->state_->comm, size, nid, rank, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    g->state_->first_failure = nccl_error(what, r, g->state_->comm);
    return g->state_->first_failure;
  }
  if (status s = settle(g->state_->comm, what, deadline_after(timeout_s), timeout_s); !s) {
    g->state_->first_failure = s;  // the destructor aborts it
    return s;
  }
  return g;
}

namespace {

// Enqueues a collective through `call`, then waits for it: the stream drained, or an asynchronous
// error, or the deadline (then the communicator is aborted by the caller's state).
template <class Call>
status run_collective(ncclComm_t comm, status& first_failure, const exec_context& ctx, double timeout_s, const std::string& what,
                      Call&& call) {
  if (!first_failure)
    return {first_failure.code(), "nccl_group: " + what + ": refused: the group failed earlier (" + first_failure.message() + ")"};
  const auto deadline = deadline_after(timeout_s);
  auto fail = [&](status s) {
    first_failure = s;
    return s;
  };
  if (cudaError_t e = cudaSetDevice(ctx.dev.index); e != cudaSuccess)
    return fail({status_code::device_error, "nccl_group: " + what + ": cudaSetDevice: " + cudaGetErrorString(e)});
  const ncclResult_t r = call(static_cast<cudaStream_t>(ctx.stream.native));
  if (r != ncclSuccess && r != ncclInProgress) return fail(nccl_error(what, r, comm));
  if (status s = settle(comm, what, deadline, timeout_s); !s) return fail(s);
  for (;;) {
    const cudaError_t q = cudaStreamQuery(static_cast<cudaStream_t>(ctx.stream.native));
    if (q == cudaSuccess) return status::ok();
    if (q != cudaErrorNotReady)
      return fail({status_code::device_error, "nccl_group: " + what + ": " + cudaGetErrorName(q) + " (" + cudaGetErrorString(q) + ")"});
    ncclResult_t async = ncclSuccess;
    if (ncclCommGetAsyncError(comm, &async) == ncclSuccess && async != ncclSuccess && async != ncclInProgress)
      return fail(nccl_error(what, async, comm));
    if (clock_type::now() > deadline)
      return fail({status_code::device_error, "nccl_group: " + what + ": timed out after " + std::to_string(timeout_s) +
                                                  " s (a peer died or never called it)"});
    std::this_thread::yield();
  }
}

}  // namespace

status nccl_group::broadcast_raw(void* data, std::int64_t count, dtype type, int root) {
  auto t = nccl_type("broadcast", type, false);
  if (!t) return t.error();
  if (root < 0 || root >= size_) return {status_code::invalid_argument, "nccl_group: broadcast: root " + std::to_string(root) + " is not a rank"};
  return run_collective(state_->comm, state_->first_failure, ctx_, timeout_s_, "broadcast", [&](cudaStream_t s) {
    return ncclBroadcast(data, data, static_cast<size_t>(count), *t, root, state_->comm, s);
  });
}

status nccl_group::all_reduce_raw(void* data, std::int64_t count, dtype type, reduce_op op) {
  auto t = nccl_type("all_reduce", type, true);
  if (!t) return t.error();
  return run_collective(state_->comm, state_->first_failure, ctx_, timeout_s_, "all_reduce", [&](cudaStream_t s) {
    return ncclAllReduce(data, data, static_cast<size_t>(count), *t, op == reduce_op::sum ? ncclSum : ncclMax, state_->comm, s);
  });
}

status nccl_group::all_gather_raw(const void* in, void* out, std::int64_t count_per_rank, dtype type) {
  auto t = nccl_type("all_gather", type, false);
  if (!t) return t.error();
  return run_collective(state_->comm, state_->first_failure, ctx_, timeout_s_, "all_gather", [&](cudaStream_t s) {
    return ncclAllGather(in, out, static_cast<size_t>(count_per_rank), *t, state_->comm, s);
  });
}

status nccl_group::reduce_scatter_raw(const void* in, void* out, std::int64_t count_per_rank, dtype type) {
  auto t = nccl_type("reduce_scatter", type, true);
  if (!t) return t.error();
  return run_collective(state_->comm, state_->first_failure, ctx_, timeout_s_, "reduce_scatter", [&](cudaStream_t s) {
    return ncclReduceScatter(in, out, static_cast<size_t>(count_per_rank), *t, ncclSum, state_->comm, s);
  });
}

#else  // no CUDA backend in this build

struct nccl_group::state {};

namespace {
status not_built() { return {status_code::unsupported, "nccl_group: this build has no CUDA backend"}; }
}  // namespace

nccl_group::nccl_group(const exec_context& ctx, int rank, int size, double timeout_s)
    : ctx_(ctx), rank_(rank), size_(size), timeout_s_(timeout_s) {}
nccl_group::~nccl_group() = default;
result<nccl_unique_id> nccl_group::make_id() { return not_built(); }
result<std::unique_ptr<nccl_group>> nccl_group::create(const exec_context&, const nccl_unique_id&, int, int, double) { return not_built(); }
status nccl_group::broadcast_raw(void*, std::int64_t, dtype, int) { return not_built(); }
status nccl_group::all_reduce_raw(void*, std::int64_t, dtype, reduce_op) { return not_built(); }
status nccl_group::all_gather_raw(const void*, void*, std::int64_t, dtype) { return not_built(); }
status nccl_group::reduce_scatter_raw(const void*, void*, std::int64_t, dtype) { return not_built(); }

#endif

}  // namespace tandem::gpu
