// A slab: one allocation holding a whole class of state (parameters, gradients, optimizer state or
// activations), addressed by byte offsets from a layout table. When training and generation share
// a device, each phase frees what the other needs:
//
//             release()                 restore()
//   resident ------------> released ------------> resident (zero-filled)
//       |                                   ^
//       |  offload(): copy to host memory,  |  restore(): reallocate, copy back
//       +--> free the device memory --> offloaded
//
// The host memory of an offload (pinned, for CUDA) stays with the slab after restore(), for the
// next offload: pinning gigabytes costs seconds, many times the copy (a colocated run offloads
// every step). release() and the destructor free it.
//
// Every transition either completes or leaves the slab in its previous state with a status
// saying why (an allocation that fails during restore() keeps the host copy).
#pragma once

#include <cstdint>
#include <string>

#include "gpu/core/device.h"
#include "gpu/core/status.h"
#include "gpu/core/tensor.h"

namespace tandem::gpu {

enum class slab_state { resident, released, offloaded };

class slab {
 public:
  /// Allocates `bytes` (zero-filled) on `dev`; `name` appears in every message.
  static result<slab> create(std::string name, std::int64_t bytes, device dev);

  slab() = default;
  slab(slab&& other) noexcept;
  slab& operator=(slab&& other) noexcept;
  slab(const slab&) = delete;
  slab& operator=(const slab&) = delete;
  ~slab();

  const std::string& name() const { return name_; }
  std::int64_t bytes() const { return bytes_; }
  /// Bytes of host memory the slab holds for offloads (0 before the first, and after release()).
  std::int64_t host_bytes() const { return host_ ? bytes_ : 0; }
  const device& dev() const { return device_; }
  slab_state state() const { return state_; }

  /// A view of `shape` at `byte_offset`; invalid_argument if it does not fit, or if the slab is
  /// not resident.
  result<tensor> view(std::int64_t byte_offset, dtype type, std::initializer_list<std::int64_t> shape) const;
  /// The same with a shape from a container (a layout table entry's).
  template <class Shape>
  result<tensor> view_of(std::int64_t byte_offset, dtype type, const Shape& shape) const {
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    if (status s = check_range(byte_offset, n * static_cast<std::int64_t>(size_of(type))); !s) return s;
    return tensor::contiguous(static_cast<char*>(data_) + byte_offset, type, shape, device_);
  }

  /// Frees the memory, the host memory of offloads too; the contents are gone. No-op when already
  /// released.
  status release();
  /// Copies the contents to host memory (allocated at the first offload, then reused), then frees
  /// the device memory.
  status offload();
  /// Makes the slab resident again: zero-filled after release(), the old contents after offload().
  status restore();

 private:
  status check_range(std::int64_t byte_offset, std::int64_t bytes) const;
  void free_all();

  std::string name_;
  std::int64_t bytes_ = 0;
  device device_;
  slab_state state_ = slab_state::released;
  void* data_ = nullptr;  // device memory when resident
  void* host_ = nullptr;  // the host copy when offloaded; kept for the next offload after a restore
};

}  // namespace tandem::gpu
