// Shared-memory collectives between threads.
#include "gpu/comm/local_group.h"

#include <barrier>
#include <cstring>
#include <string>

namespace tandem::gpu {
namespace internal {

struct local_group_state {
  explicit local_group_state(int n) : size(n), buffers(static_cast<std::size_t>(n)), counts(static_cast<std::size_t>(n)), sync(n) {}
  int size;
  std::vector<const void*> buffers;
  std::vector<std::int64_t> counts;
  std::barrier<> sync;
};

}  // namespace internal

namespace {

/// Reduces `n` elements of every rank's buffer (in rank order) into out, computing in T.
template <class T, class Acc>
void reduce_into(const std::vector<const void*>& buffers, std::int64_t offset, std::int64_t n, reduce_op op, T* out) {
  for (std::int64_t i = 0; i < n; ++i) {
    Acc acc = static_cast<Acc>(static_cast<const T*>(buffers[0])[offset + i]);
    for (std::size_t r = 1; r < buffers.size(); ++r) {
      const Acc v = static_cast<Acc>(static_cast<const T*>(buffers[r])[offset + i]);
      acc = op == reduce_op::sum ? acc + v : (v > acc ? v : acc);
    }
    out[i] = static_cast<T>(acc);
  }
}

/// The same for 16-bit floats: accumulate in float32, round once.
template <class H>
void reduce_half(const std::vector<const void*>& buffers, std::int64_t offset, std::int64_t n, reduce_op op, H* out) {
  for (std::int64_t i = 0; i < n; ++i) {
    float acc = to_float(static_cast<const H*>(buffers[0])[offset + i]);
    for (std::size_t r = 1; r < buffers.size(); ++r) {
      const float v = to_float(static_cast<const H*>(buffers[r])[offset + i]);
      acc = op == reduce_op::sum ? acc + v : (v > acc ? v : acc);
    }
    if constexpr (std::is_same_v<H, bfloat16>) out[i] = to_bfloat16(acc);
    else out[i] = to_float16(acc);
  }
}

void reduce(dtype type, const std::vector<const void*>& buffers, std::int64_t offset, std::int64_t n, reduce_op op,
            void* out) {
  switch (type) {
    case dtype::float32: return reduce_into<float, float>(buffers, offset, n, op, static_cast<float*>(out));
    case dtype::float64: return reduce_into<double, double>(buffers, offset, n, op, static_cast<double*>(out));
    case dtype::int32: return reduce_into<std::int32_t, std::int64_t>(buffers, offset, n, op, static_cast<std::int32_t*>(out));
    case dtype::bfloat16: return reduce_half(buffers, offset, n, op, static_cast<bfloat16*>(out));
    case dtype::float16: return reduce_half(buffers, offset, n, op, static_cast<float16*>(out));
    case dtype::uint8: return;  // refused before any reduction (refuse_reduction)
  }
}

/// Bytes are moved, never reduced: a reduction over uint8 is refused with a status naming the op.
status refuse_reduction(dtype type, const char* op) {
  if (type != dtype::uint8) return status::ok();
  return {status_code::invalid_argument, std::string(op) + ": " + std::string(to_string(type)) +
                                             " elements are opaque bytes and cannot be reduced (broadcast and "
                                             "all_gather move them)"};
}

}  // namespace

local_communicator::local_communicator(std::shared_ptr<internal::local_group_state> group, int rank)
    : group_(std::move(group)), rank_(rank) {}

int local_communicator::size() const { return group_->size; }

status local_communicator::exchange(const void* buffer, std::int64_t count, const char* op) {
  group_->buffers[static_cast<std::size_t>(rank_)] = buffer;
  group_->counts[static_cast<std::size_t>(rank_)] = count;
  group_->sync.arrive_and_wait();
  for (int r = 0; r < group_->size; ++r) {
    if (group_->counts[static_cast<std::size_t>(r)] != count) {
      finish();  // every rank sees the same mismatch and leaves together
      return {status_code::invalid_argument, std::string(op) + ": rank " + std::to_string(r) + " passed " +
                                                 std::to_string(group_->counts[static_cast<std::size_t>(r)]) +
                                                 " elements, rank " + std::to_string(rank_) + " " +
                                                 std::to_string(count)};
    }
  }
  return status::ok();
}

void local_communicator::finish() { group_->sync.arrive_and_wait(); }

status local_communicator::broadcast_raw(void* data, std::int64_t count, dtype type, int root) {
  if (status s = exchange(data, count, "broadcast"); !s) return s;
  if (root < 0 || root >= size()) {
    finish();  // keeps the barrier phases of every rank aligned
    return {status_code::invalid_argument, "broadcast: root " + std::to_string(root) + " is not a rank"};
  }
  if (rank_ != root)
    std::memcpy(data, group_->buffers[static_cast<std::size_t>(root)], static_cast<std::size_t>(count) * size_of(type));
  finish();
  return status::ok();
}

status local_communicator::all_reduce_raw(void* data, std::int64_t count, dtype type, reduce_op op) {
  if (status s = exchange(data, count, "all_reduce"); !s) return s;
  if (status s = refuse_reduction(type, "all_reduce"); !s) {
    finish();  // keeps the barrier phases of every rank aligned
    return s;
  }
  std::vector<std::byte> result(static_cast<std::size_t>(count) * size_of(type));
  reduce(type, group_->buffers, 0, count, op, result.data());
  finish();  // nobody writes in place before every rank has read
  std::memcpy(data, result.data(), result.size());
  return status::ok();
}

status local_communicator::all_gather_raw(const void* in, void* out, std::int64_t count_per_rank, dtype type) {
  if (status s = exchange(in, count_per_rank, "all_gather"); !s) return s;
  const std::size_t bytes = static_cast<std::size_t>(count_per_rank) * size_of(type);
  for (int r = 0; r < size(); ++r)
    std::memcpy(static_cast<std::byte*>(out) + static_cast<std::size_t>(r) * bytes, group_->buffers[static_cast<std::size_t>(r)], bytes);
  finish();
  return status::ok();
}

status local_communicator::reduce_scatter_raw(const void* in, void* out, std::int64_t count_per_rank, dtype type) {
  if (status s = exchange(in, count_per_rank, "reduce_scatter"); !s) return s;
  if (status s = refuse_reduction(type, "reduce_scatter"); !s) {
    finish();
    return s;
  }
  reduce(type, group_->buffers, rank_ * count_per_rank, count_per_rank, reduce_op::sum, out);
  finish();
  return status::ok();
}

std::vector<std::unique_ptr<communicator>> make_local_group(int size) {
  auto state = std::make_shared<internal::local_group_state>(size);
  std::vector<std::unique_ptr<communicator>> out;
  for (int r = 0; r < size; ++r) out.push_back(std::make_unique<local_communicator>(state, r));
  return out;
}

}  // namespace tandem::gpu
