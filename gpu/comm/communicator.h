// Collectives between the ranks of a group (data-parallel policy ranks; policy and rollout ranks
// for refit), typed over element types: callers pass spans, the element count and wire type come
// from the span, so a byte count can never be passed where an element count belongs. Bytes
// (std::span<std::byte> or <std::uint8_t>) are an element type of their own, dtype::uint8:
// broadcast and all_gather move them as they are; all_reduce and reduce_scatter refuse them
// (invalid_argument naming the op and the dtype), as bytes have no sum.
//
// Implementations: local_group (ranks as threads of one process; tests and single-node CPU
// runs), ZeroMQ between CPU members and NCCL between GPUs (later issues).
//
// Contract of every collective: all ranks call it in the same order with matching sizes; it
// returns when this rank's part is complete. On failure (a peer died, sizes disagree) it returns
// a status and the output buffers are unspecified; the inputs are untouched unless they are also
// the output (in-place all_reduce, broadcast).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <type_traits>

#include "gpu/core/dtype_of.h"
#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"

namespace tandem::gpu {

enum class reduce_op { sum, max };

class communicator {
 public:
  virtual ~communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Where the collectives run: their buffers live on context().dev and their work is ordered on
  /// context().stream. The host groups (local_group, zmq_group) run on the CPU, on the calling
  /// thread; a device group is created on its device and stream.
  virtual exec_context context() const = 0;

  /// data is root's data on every rank afterwards.
  template <class T>
  status broadcast(std::span<T> data, int root) {
    return broadcast_raw(data.data(), static_cast<std::int64_t>(data.size()), dtype_of<T>(), root);
  }
  /// In place: data becomes the element-wise reduction over ranks.
  template <class T>
  status all_reduce(std::span<T> data, reduce_op op = reduce_op::sum) {
    return all_reduce_raw(data.data(), static_cast<std::int64_t>(data.size()), dtype_of<T>(), op);
  }
  /// out = concat over ranks of in; out.size() == in.size() * size().
  template <class T>
  status all_gather(std::span<const std::type_identity_t<T>> in, std::span<T> out) {
    if (out.size() != in.size() * static_cast<std::size_t>(size())) return size_mismatch("all_gather");
    return all_gather_raw(in.data(), out.data(), static_cast<std::int64_t>(in.size()), dtype_of<T>());
  }
  /// out = this rank's shard (rank r: elements [r*n, (r+1)*n)) of the sum over ranks of in;
  /// in.size() == out.size() * size().
  template <class T>
  status reduce_scatter(std::span<const std::type_identity_t<T>> in, std::span<T> out) {
    if (in.size() != out.size() * static_cast<std::size_t>(size())) return size_mismatch("reduce_scatter");
    return reduce_scatter_raw(in.data(), out.data(), static_cast<std::int64_t>(out.size()), dtype_of<T>());
  }

 protected:
  // Counts are element counts of `type`.
  virtual status broadcast_raw(void* data, std::int64_t count, dtype type, int root) = 0;
  virtual status all_reduce_raw(void* data, std::int64_t count, dtype type, reduce_op op) = 0;
  virtual status all_gather_raw(const void* in, void* out, std::int64_t count_per_rank, dtype type) = 0;
  virtual status reduce_scatter_raw(const void* in, void* out, std::int64_t count_per_rank, dtype type) = 0;

 private:
  static status size_mismatch(const char* op) {
    return {status_code::invalid_argument, std::string(op) + ": output size must be the input size times the group size (or its inverse)"};
  }
};

}  // namespace tandem::gpu
