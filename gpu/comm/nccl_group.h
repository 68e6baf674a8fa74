// NCCL between GPUs behind the communicator contract (communicator.h): one rank per GPU, the
// collectives enqueued on the group's stream and waited for, so each call returns when this rank's
// part is complete, as the contract says.
//
//   rank 0: make_id() --(the run's authenticated control plane)--> every rank: create(ctx, id, r, n)
//
// The communicator is created non-blocking: initialisation and every collective are polled, and a
// peer that never arrives (dead, or never calling the collective) makes the call fail after
// `timeout_s` with the communicator aborted, instead of hanging the rank. After a failure the
// group is unusable (every later call is refused naming the first failure); the caller builds a
// new one. A build without CUDA refuses create() as not built.
#pragma once

#include <array>
#include <cstddef>
#include <memory>

#include "gpu/comm/communicator.h"

namespace tandem::gpu {

/// ncclUniqueId's bytes: what rank 0 hands every other rank to form the group.
struct nccl_unique_id {
  std::array<std::byte, 128> bytes{};
};

class nccl_group final : public communicator {
 public:
  /// A fresh id (ncclGetUniqueId).
  static result<nccl_unique_id> make_id();
  /// Joins the group `id` names as `rank` of `size` on ctx's CUDA device, ordered on ctx.stream.
  static result<std::unique_ptr<nccl_group>> create(const exec_context& ctx, const nccl_unique_id& id, int rank, int size,
                                                    double timeout_s = 300);
  ~nccl_group() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  exec_context context() const override { return ctx_; }

 protected:
  status broadcast_raw(void* data, std::int64_t count, dtype type, int root) override;
  status all_reduce_raw(void* data, std::int64_t count, dtype type, reduce_op op) override;
  status all_gather_raw(const void* in, void* out, std::int64_t count_per_rank, dtype type) override;
  status reduce_scatter_raw(const void* in, void* out, std::int64_t count_per_rank, dtype type) override;

 private:
  struct state;
  nccl_group(const exec_context& ctx, int rank, int size, double timeout_s);

  exec_context ctx_;
  int rank_ = 0, size_ = 1;
  double timeout_s_ = 300;
  std::unique_ptr<state> state_;
};

}  // namespace tandem::gpu
