// Private helpers of the CUDA MoE kernels (nvcc only): one op_scratch span carved into aligned
// pieces, and the size of the slot chunks that the per-expert passes work in.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tandem::gpu::ops::cuda::moe_detail {

/// Slots (token, k) per chunk, one block of this many threads per chunk.
constexpr int chunk_slots = 256;

/// Pieces of one scratch span, each 256-byte aligned. Run the carving code once with no base to
/// learn bytes(), then again over the span.
class scratch_plan {
 public:
  explicit scratch_plan(std::byte* base = nullptr) : base_(base) {}
  template <class T>
  T* take(std::int64_t count) {
    offset_ = (offset_ + 255) / 256 * 256;
    T* p = base_ ? reinterpret_cast<T*>(base_ + offset_) : nullptr;
    offset_ += static_cast<std::size_t>(count) * sizeof(T);
    return p;
  }
  std::size_t bytes() const { return offset_; }

 private:
  std::byte* base_;
  std::size_t offset_ = 0;
};

}  // namespace tandem::gpu::ops::cuda::moe_detail
