// An owning, zero-initialised, 64-byte aligned host tensor: scratch space of the CPU backend and
// the inputs and outputs of tests. Copies share the storage. Model state lives in slabs (slab.h).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <span>
#include <type_traits>
#include <vector>

#include "gpu/core/dtype_of.h"
#include "gpu/core/tensor.h"

namespace tandem::gpu {

/// Bytes held by live host buffers of this process, and the most held at once since the last
/// reset: the CPU backend's activations and scratch are host buffers, so this is its
/// activation high-water mark (model state lives in slabs and is not counted).
std::int64_t host_buffer_live_bytes();
std::int64_t host_buffer_peak_bytes();
/// Starts a new high-water mark at the bytes live now.
void reset_host_buffer_peak();

class host_buffer {
 public:
  host_buffer() = default;
  host_buffer(dtype type, std::vector<std::int64_t> shape);

  /// A buffer of T's dtype holding `values` (its size must match the shape).
  template <class T>
  static host_buffer of(std::vector<std::int64_t> shape, const std::vector<T>& values);

  tensor view() const { return tensor::contiguous(data_.get(), type_, shape_); }
  operator tensor() const { return view(); }  // NOLINT: a buffer is usable wherever a view is

  template <class T>
  T* data() const { return static_cast<T*>(data_.get()); }
  /// The shared storage (a device_buffer on the CPU holds it).
  const std::shared_ptr<void>& storage() const { return data_; }
  template <class T>
  std::span<T> span() const { return {data<T>(), static_cast<std::size_t>(numel())}; }
  template <class T>
  std::vector<T> to_vector() const { return {data<T>(), data<T>() + numel()}; }

  dtype type() const { return type_; }
  const std::vector<std::int64_t>& shape() const { return shape_; }
  std::int64_t numel() const;

 private:
  struct aligned_free {
    std::int64_t bytes = 0;
    void operator()(void* p) const;
  };
  dtype type_ = dtype::float32;
  std::vector<std::int64_t> shape_;
  std::shared_ptr<void> data_;
};

template <class T>
host_buffer host_buffer::of(std::vector<std::int64_t> shape, const std::vector<T>& values) {
  host_buffer b(dtype_of<T>(), std::move(shape));
  if (static_cast<std::int64_t>(values.size()) != b.numel()) std::abort();  // a test bug
  std::copy(values.begin(), values.end(), b.data<T>());
  return b;
}

}  // namespace tandem::gpu
