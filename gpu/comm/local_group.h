// A communicator group whose ranks are threads of one process, exchanging through shared memory.
// Reductions add the ranks' contributions in rank order, so every rank gets bitwise the same
// result. uint8 (bytes) is moved by broadcast and all_gather; all_reduce and reduce_scatter
// refuse it (invalid_argument naming the op and the dtype). Used by tests and by in-process
// runs (the refit group of actor tests).
#pragma once

#include <memory>
#include <vector>

#include "gpu/comm/communicator.h"

namespace tandem::gpu {

namespace internal {
struct local_group_state;
}

class local_communicator final : public communicator {
 public:
  local_communicator(std::shared_ptr<internal::local_group_state> group, int rank);
  int rank() const override { return rank_; }
  int size() const override;
  exec_context context() const override { return exec_context::cpu(); }

 protected:
  status broadcast_raw(void* data, std::int64_t count, dtype type, int root) override;
  status all_reduce_raw(void* data, std::int64_t count, dtype type, reduce_op op) override;
  status all_gather_raw(const void* in, void* out, std::int64_t count_per_rank, dtype type) override;
  status reduce_scatter_raw(const void* in, void* out, std::int64_t count_per_rank, dtype type) override;

 private:
  /// Publishes this rank's buffer and count, waits for every rank; refuses mismatched counts.
  status exchange(const void* buffer, std::int64_t count, const char* op);
  void finish();  // waits until every rank has read what it needs

  std::shared_ptr<internal::local_group_state> group_;
  int rank_;
};

/// `size` communicators sharing one group; hand communicator r to the thread of rank r.
std::vector<std::unique_ptr<communicator>> make_local_group(int size);

}  // namespace tandem::gpu
