// Sums of squares over ranges of a flat tensor, in float64: the global gradient norm of an
// optimizer step (one range per trainable tensor of a gradient slab), each tensor's sum kept
// apart so a non-finite one is named.
#pragma once

#include <cstdint>
#include <span>

#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"
#include "gpu/core/tensor.h"

namespace tandem::gpu::ops {

/// Elements [offset, offset + count) of a flat tensor.
struct element_range {
  std::int64_t offset = 0;
  std::int64_t count = 0;
};

/// sums[r] = Σ x[k]² over the elements k of ranges[r], each square formed in float64 from x's
/// stored value, the sum in float64. Ranges lie inside x, in any order, may overlap or be empty.
///
/// Order of the sums: on the CPU, element by element in index order; on CUDA, in chunks of
/// 16384 elements, each chunk a fixed tree over its block's threads, a range's chunk sums added
/// in a fixed tree of the same shape (each of 256 threads adds every 256th chunk in order). Both
/// are deterministic (the same bits run after run); they are not the same order.
///
///   x       F32 | BF16 on CUDA, F32 | F64 on the CPU [n], contiguous
///   ranges  host memory
///   sums    host memory, ranges.size() values, written
/// Returns once the sums are on the host (a CUDA call waits for its stream). On failure `sums`
/// is unspecified.
status sum_squares(const exec_context& ctx, const tensor& x, std::span<const element_range> ranges, std::span<double> sums);

}  // namespace tandem::gpu::ops
