// Tensor view geometry.
#include "gpu/core/tensor.h"

#include <cstdlib>
#include <vector>

namespace tandem::gpu {

tensor::tensor(void* data, dtype type, std::initializer_list<std::int64_t> shape, device dev) {
  init(data, type, shape.begin(), static_cast<int>(shape.size()), dev);
}

void tensor::init(void* data, dtype type, const std::int64_t* shape, int rank, device dev) {
  if (rank > max_rank) std::abort();  // an invariant of the model code, not user input
  data_ = data;
  type_ = type;
  rank_ = rank;
  device_ = dev;
  std::int64_t stride = 1;
  for (int i = rank - 1; i >= 0; --i) {
    shape_[static_cast<std::size_t>(i)] = shape[i];
    strides_[static_cast<std::size_t>(i)] = stride;
    stride *= shape[i];
  }
}

std::int64_t tensor::numel() const {
  std::int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= shape_[static_cast<std::size_t>(i)];
  return n;
}

bool tensor::is_contiguous() const {
  std::int64_t stride = 1;
  for (int i = rank_ - 1; i >= 0; --i) {
    if (shape_[static_cast<std::size_t>(i)] != 1 && strides_[static_cast<std::size_t>(i)] != stride) return false;
    stride *= shape_[static_cast<std::size_t>(i)];
  }
  return true;
}

tensor tensor::reshaped(std::initializer_list<std::int64_t> shape) const {
  tensor t;
  t.init(data_, type_, shape.begin(), static_cast<int>(shape.size()), device_);
  if (t.numel() != numel() || !is_contiguous()) std::abort();
  return t;
}

tensor tensor::rows(std::int64_t begin, std::int64_t end) const {
  tensor t = *this;
  t.shape_[0] = end - begin;
  t.data_ = static_cast<char*>(data_) + begin * strides_[0] * static_cast<std::int64_t>(size_of(type_));
  return t;
}

std::string shape_string(std::span<const std::int64_t> shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string tensor::shape_string() const {
  return gpu::shape_string(std::span<const std::int64_t>(shape_.data(), static_cast<std::size_t>(rank_)));
}

std::string tensor::describe() const {
  std::string t;
  switch (type_) {
    case dtype::float32: t = "F32"; break;
    case dtype::bfloat16: t = "BF16"; break;
    case dtype::float16: t = "F16"; break;
    case dtype::float64: t = "F64"; break;
    case dtype::int32: t = "I32"; break;
    case dtype::uint8: t = "U8"; break;
  }
  return t + " " + shape_string() + " " + device_.to_string();
}

}  // namespace tandem::gpu
