// Where and with what work runs: the device, the stream that orders it, and a scratch workspace.
// Every op takes one as its first argument, every communicator is bound to one, and every engine
// is created on one, so a backend that needs a stream or scratch memory (the CUDA backend:
// a stream per engine, cuBLASLt's workspace) fits the same signatures as the CPU reference.
//
// On the CPU the stream is null: work runs on the calling thread (and its OpenMP team), in call
// order, and is complete when the call returns. On CUDA the stream is a cudaStream_t and an op
// returns once its work is enqueued.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "gpu/core/device.h"
#include "gpu/core/status.h"

namespace tandem::gpu {

/// An opaque handle to the queue work is ordered on: a cudaStream_t on CUDA (null: the default
/// stream), always null on the CPU.
struct stream_ref {
  void* native = nullptr;
  bool operator==(const stream_ref&) const = default;
};

/// Scratch memory on one device, grown on demand and reused call after call, so an op in a hot
/// loop allocates nothing. Not thread-safe: one workspace per context per thread of work.
///
///   empty --scratch(n)--> holds max(n, what it held) bytes --scratch(m)--> ... --trim()--> empty
///
/// The span scratch() returns is valid until the next scratch() or trim() on the workspace; its
/// contents are unspecified (not zeroed).
class workspace {
 public:
  explicit workspace(device dev = device::cpu()) : device_(dev) {}
  workspace(const workspace&) = delete;
  workspace& operator=(const workspace&) = delete;
  ~workspace() { trim(); }

  /// At least `bytes` bytes, 64-byte aligned (256 on CUDA). An allocation failure returns
  /// out_of_memory naming `who` and the bytes asked for; the workspace keeps what it held.
  result<std::span<std::byte>> scratch(std::string_view who, std::size_t bytes);
  /// Frees the memory (a colocated engine gives it back while the other engine runs).
  void trim();

  const device& dev() const { return device_; }
  /// Bytes held now, and the most ever asked for at once.
  std::size_t capacity() const { return capacity_; }
  std::size_t high_water() const { return high_water_; }

 private:
  device device_;
  void* data_ = nullptr;
  std::size_t capacity_ = 0;
  std::size_t high_water_ = 0;
};

/// The context of a call. Cheap to copy; the workspace, when given, must outlive every call
/// made with the context.
struct exec_context {
  device dev = device::cpu();
  stream_ref stream;
  workspace* scratch = nullptr;  ///< null: an op that needs scratch allocates it for the call

  /// The CPU, no stream, no shared workspace.
  static exec_context cpu() { return {}; }
  /// invalid_argument "<op>: <what> is on <device>, but the call runs on <dev>" unless `where`
  /// is this context's device.
  status expect_device(std::string_view op, std::string_view what, const device& where) const;
};

}  // namespace tandem::gpu
