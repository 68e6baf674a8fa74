// A refit-group rank for the stream tests: every broadcast goes to the real rank after a tap saw
// the buffer (and may change it on the root, as corruption in transit would), and at broadcast
// `leave_at` the rank leaves: it drops its real rank (a zmq_group tells its peers it left) and
// fails that broadcast and every later one, as a process dying mid-stream would. A stream's
// broadcasts are numbered: 0 the opening, 1 + i the payload of bucket i, 1 + count the closing
// (actors/api/refit_stream.hpp).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "gpu/comm/communicator.h"

namespace tandem::test {

/// Called before broadcast `call` (0, 1, ... on this rank); `root` tells whether this rank sends.
using tap_function = std::function<void(int call, bool root, std::span<std::byte> data)>;

class tapped_communicator final : public gpu::communicator {
 public:
  tapped_communicator(std::shared_ptr<gpu::communicator> inner, tap_function tap, int leave_at = -1)
      : inner_(std::move(inner)), tap_(std::move(tap)), rank_(inner_->rank()), size_(inner_->size()), leave_at_(leave_at) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  gpu::exec_context context() const override { return gpu::exec_context::cpu(); }

 protected:
  gpu::status broadcast_raw(void* data, std::int64_t count, gpu::dtype type, int root) override {
    if (type != gpu::dtype::uint8) return unsupported("broadcast of another type than bytes");
    const std::span<std::byte> bytes(static_cast<std::byte*>(data), static_cast<std::size_t>(count));
    const int call = calls_++;
    if (tap_) tap_(call, root == rank_, bytes);
    if (call == leave_at_) inner_.reset();
    if (!inner_)
      return {gpu::status_code::io_error, "rank " + std::to_string(rank_) + " left the group at its broadcast " +
                                              std::to_string(leave_at_) + " (a peer dying mid-stream)"};
    return inner_->broadcast(bytes, root);
  }
  gpu::status all_reduce_raw(void*, std::int64_t, gpu::dtype, gpu::reduce_op) override { return unsupported("all_reduce"); }
  gpu::status all_gather_raw(const void*, void*, std::int64_t, gpu::dtype) override { return unsupported("all_gather"); }
  gpu::status reduce_scatter_raw(const void*, void*, std::int64_t, gpu::dtype) override {
    return unsupported("reduce_scatter");
  }

 private:
  static gpu::status unsupported(const char* what) {
    return {gpu::status_code::unsupported, std::string("tapped_communicator: ") + what};
  }

  std::shared_ptr<gpu::communicator> inner_;
  tap_function tap_;
  int rank_;
  int size_;
  int leave_at_;
  int calls_ = 0;  // this rank's engine executor only
};

}  // namespace tandem::test
