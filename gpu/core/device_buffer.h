// An owning tensor in the memory of the device a context runs on: the activations and per-call
// buffers of the model code, so the same code runs on the CPU and on CUDA. Copies share the
// storage, which is freed when the last copy goes. Model state (weights, gradients, optimizer
// state) lives in slabs (slab.h), not here.
//
//   CPU   aligned host memory, zero-filled; counted with the host buffers (host_buffer.h), so the
//         CPU backend's activation high-water mark covers both;
//   CUDA  stream-ordered memory (cudaMallocAsync on the context's stream, zero-filled there, freed
//         on that stream when the last copy goes), counted per device.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpu/core/device.h"
#include "gpu/core/dtype.h"
#include "gpu/core/dtype_of.h"
#include "gpu/core/exec_context.h"
#include "gpu/core/memory.h"
#include "gpu/core/status.h"
#include "gpu/core/tensor.h"

namespace tandem::gpu {

class device_buffer {
 public:
  device_buffer() = default;

  /// `type` [shape] on ctx.dev, zero-filled (ordered on ctx.stream on CUDA); out_of_memory naming
  /// the bytes and the device when the allocation fails.
  static result<device_buffer> zeros(const exec_context& ctx, dtype type, std::vector<std::int64_t> shape);
  /// The same without the fill, for a buffer its next op writes whole: on CUDA whatever the
  /// memory held (no memset on the stream); on the CPU every byte 0xFF (NaN in every floating
  /// dtype, -1 in the integers), so code that reads such a buffer before writing it computes NaN
  /// in the CPU tests instead of passing by the luck of a zero.
  static result<device_buffer> unfilled(const exec_context& ctx, dtype type, std::vector<std::int64_t> shape);

  tensor view() const { return tensor::contiguous(data_.get(), type_, shape_, device_); }
  operator tensor() const { return view(); }  // NOLINT: a buffer is usable wherever a view is

  /// The storage: device memory on CUDA, never to be dereferenced on the host there.
  template <class T>
  T* data() const { return static_cast<T*>(data_.get()); }

  /// Every element as T (the buffer's dtype must be T's), copied to the host after the work
  /// enqueued on ctx.stream.
  template <class T>
  result<std::vector<T>> read(const exec_context& ctx) const;

  dtype type() const { return type_; }
  const std::vector<std::int64_t>& shape() const { return shape_; }
  const device& dev() const { return device_; }
  std::int64_t numel() const;
  bool empty() const { return !data_; }

 private:
  static result<device_buffer> allocate(const exec_context& ctx, dtype type, std::vector<std::int64_t> shape, bool zero);

  dtype type_ = dtype::float32;
  std::vector<std::int64_t> shape_;
  device device_;
  std::shared_ptr<void> data_;
};

template <class T>
result<std::vector<T>> device_buffer::read(const exec_context& ctx) const {
  if (dtype_of<T>() != type_)
    return status(status_code::invalid_argument, "device_buffer::read: the buffer holds " + std::string(to_string(type_)));
  std::vector<T> out(static_cast<std::size_t>(numel()));
  if (status s = copy_to_host(ctx, out.data(), data_.get(), numel() * static_cast<std::int64_t>(sizeof(T))); !s) return s;
  return out;
}

/// One buffer to allocate: where it goes, its shape, and its dtype where it differs from the
/// call's (a float32 statistic such as an inverse RMS or a log-sum-exp beside bfloat16 values).
struct buffer_request {
  device_buffer* out;
  std::vector<std::int64_t> shape;
  std::optional<dtype> type = std::nullopt;
};

/// device_buffer::zeros(ctx, the request's type or else `type`, shape) into each request's `out`,
/// in order; the first failure is returned (buffers made before it stay made).
status allocate_buffers(const exec_context& ctx, dtype type, std::initializer_list<buffer_request> requests);
/// The same with device_buffer::unfilled: for buffers that the ops after the call write whole.
status allocate_unfilled_buffers(const exec_context& ctx, dtype type, std::initializer_list<buffer_request> requests);

/// Bytes of live device buffers on `dev` and the most live at once since the last reset. On the
/// CPU these are the host buffers' figures (host_buffer_live_bytes), which include device_buffers.
std::int64_t device_buffer_live_bytes(const device& dev);
std::int64_t device_buffer_peak_bytes(const device& dev);
/// Starts a new high-water mark on `dev` at the bytes live now.
void reset_device_buffer_peak(const device& dev);

}  // namespace tandem::gpu
