// A non-owning tensor view: pointer, dtype, shape, strides (in elements) and device. Storage comes
// from slabs (slab.h) or host buffers (host_buffer.h). Shapes are row-major; the last dimension
// is the fastest. Convention for comments on declarations: `// F32 [tokens, hidden]`.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>

#include "gpu/core/device.h"
#include "gpu/core/dtype.h"

namespace tandem::gpu {

/// "[4, 8]": a shape as every message writes it.
std::string shape_string(std::span<const std::int64_t> shape);

class tensor {
 public:
  static constexpr int max_rank = 6;

  tensor() = default;
  /// A contiguous view of `shape` at `data`.
  tensor(void* data, dtype type, std::initializer_list<std::int64_t> shape, device dev = device::cpu());
  /// The same from a shape held in a container.
  template <class Shape>
  static tensor contiguous(void* data, dtype type, const Shape& shape, device dev = device::cpu()) {
    tensor t;
    t.init(data, type, shape.data(), static_cast<int>(shape.size()), dev);
    return t;
  }

  void* data() const { return data_; }
  dtype type() const { return type_; }
  const device& dev() const { return device_; }
  int rank() const { return rank_; }
  /// Size of dimension `i`; negative i counts from the end (-1: last).
  std::int64_t dim(int i) const { return shape_[static_cast<std::size_t>(i < 0 ? rank_ + i : i)]; }
  std::int64_t stride(int i) const { return strides_[static_cast<std::size_t>(i < 0 ? rank_ + i : i)]; }
  std::int64_t numel() const;
  std::int64_t bytes() const { return numel() * static_cast<std::int64_t>(size_of(type_)); }
  bool is_contiguous() const;
  bool empty() const { return data_ == nullptr; }

  /// Typed pointer; the caller has checked type() (ops do, through check helpers).
  template <class T>
  T* as() const { return static_cast<T*>(data_); }

  /// The same memory seen with another contiguous shape of equal element count.
  tensor reshaped(std::initializer_list<std::int64_t> shape) const;
  /// Rows [begin, end) of dimension 0 (contiguous in dimension 0's stride).
  tensor rows(std::int64_t begin, std::int64_t end) const;

  /// "F32 [4, 8] cpu" for messages.
  std::string describe() const;
  /// "[4, 8]".
  std::string shape_string() const;

 private:
  void init(void* data, dtype type, const std::int64_t* shape, int rank, device dev);

  void* data_ = nullptr;
  dtype type_ = dtype::float32;
  int rank_ = 0;
  std::array<std::int64_t, max_rank> shape_{};
  std::array<std::int64_t, max_rank> strides_{};
  device device_;
};

}  // namespace tandem::gpu
