// Small int32 arrays a step builds on the host (tokens, positions, offsets, block tables),
// gathered in host staging memory and sent to the device in one copy that is enqueued, not waited
// for: a step then never stops for its inputs. Each array is readable afterwards both on the host
// (its staging copy: the host mirror the ops check) and on the device.
//
//   begin() --add()...--> filled --send()--> in flight --(the owner synchronised with the stream:
//      ^                                                   mark_complete())--> complete
//      +---------------------------------------------------------------------------+
//
// The staging memory is reused by the next batch, so begin() on a batch still in flight (a step
// that failed before its read-back) first waits for the device. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "gpu/core/device.h"
#include "gpu/core/device_buffer.h"
#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"
#include "gpu/core/tensor.h"

namespace tandem::gpu {

class upload_batch {
 public:
  explicit upload_batch(device dev) : dev_(dev) {}
  upload_batch(const upload_batch&) = delete;
  upload_batch& operator=(const upload_batch&) = delete;
  ~upload_batch();

  /// Starts a batch (the previous one's arrays and views are gone); waits for ctx's device first
  /// when the previous batch is still in flight.
  status begin(const exec_context& ctx);
  /// Appends a copy of `values` as an I32 tensor of `shape` (whose elements must number
  /// values.size()); returns its index. out_of_memory when the staging cannot grow.
  result<std::size_t> add(std::span<const std::int32_t> values, std::vector<std::int64_t> shape);
  /// One enqueued copy of every array added since begin() into a fresh device buffer.
  status send(const exec_context& ctx);
  /// The owner has synchronised with the stream since send() (a copy to the host, a wait).
  void mark_complete() { in_flight_ = false; }

  /// Array i in host staging memory, and on the device once sent (until the next begin()).
  tensor host(std::size_t i) const;
  tensor on_device(std::size_t i) const;

 private:
  struct entry {
    std::int64_t offset;  // in int32 elements, a multiple of 4 (16-byte aligned)
    std::vector<std::int64_t> shape;
  };
  status reserve(std::int64_t elements);

  device dev_;
  std::int32_t* staging_ = nullptr;  // host_staging_allocate(dev_): pinned on CUDA
  std::int64_t capacity_ = 0;        // elements
  std::int64_t used_ = 0;
  std::vector<entry> entries_;
  device_buffer sent_;
  bool in_flight_ = false;
};

}  // namespace tandem::gpu
