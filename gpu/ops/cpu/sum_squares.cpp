// Sums of squares by range on the CPU: one range at a time, in index order.
#include "gpu/ops/cpu/sum_squares.h"

namespace tandem::gpu::ops::cpu {

template <class T>
void sum_squares(const T* x, std::span<const element_range> ranges, std::span<double> sums) {
  for (std::size_t r = 0; r < ranges.size(); ++r) {
    const T* d = x + ranges[r].offset;
    double part = 0;
    for (std::int64_t k = 0; k < ranges[r].count; ++k) part += static_cast<double>(d[k]) * static_cast<double>(d[k]);
    sums[r] = part;
  }
}

template void sum_squares<float>(const float*, std::span<const element_range>, std::span<double>);
template void sum_squares<double>(const double*, std::span<const element_range>, std::span<double>);

}  // namespace tandem::gpu::ops::cpu
