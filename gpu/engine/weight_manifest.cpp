// Manifest comparison and bucket cutting.
#include "gpu/engine/weight_manifest.h"

#include <algorithm>

#include "gpu/core/tensor.h"

namespace tandem::gpu {

status check_manifest(const weight_manifest& ours, const weight_manifest& theirs) {
  const std::size_t n = std::min(ours.size(), theirs.size());
  for (std::size_t i = 0; i < n; ++i) {
    const auto& a = ours[i];
    const auto& b = theirs[i];
    std::string what;
    if (a.name != b.name) what = "name " + b.name + " where " + a.name + " was expected";
    else if (a.shape != b.shape) what = a.name + ": shape " + shape_string(b.shape) + " vs " + shape_string(a.shape);
    else if (a.type != b.type)
      what = a.name + ": dtype " + std::string(to_string(b.type)) + " vs " + std::string(to_string(a.type));
    if (!what.empty()) return {status_code::invalid_argument, "manifest entry " + std::to_string(i) + ": " + what};
  }
  if (ours.size() != theirs.size())
    return {status_code::invalid_argument, "manifest has " + std::to_string(theirs.size()) + " entries, expected " +
                                               std::to_string(ours.size())};
  return status::ok();
}

bucket_plan::bucket_plan(const weight_manifest& manifest, std::int64_t bucket_bytes) {
  for (const auto& e : manifest) {
    entry_begin_.push_back(total_);
    entry_bytes_.push_back(e.bytes());
    total_ += e.bytes();
  }
  const std::int64_t step = std::max<std::int64_t>(1, bucket_bytes);
  for (std::int64_t b = 0; b < total_; b += step) bucket_begin_.push_back(b);
}

std::int64_t bucket_plan::bucket_size(std::size_t i) const {
  const std::int64_t end = i + 1 < bucket_begin_.size() ? bucket_begin_[i + 1] : total_;
  return end - bucket_begin_[i];
}

std::vector<bucket_piece> bucket_plan::pieces(std::size_t i) const {
  std::vector<bucket_piece> out;
  const std::int64_t begin = bucket_begin_[i], end = begin + bucket_size(i);
  // First entry whose end lies past the bucket's start.
  auto it = std::upper_bound(entry_begin_.begin(), entry_begin_.end(), begin);
  std::size_t e = static_cast<std::size_t>(std::max<std::ptrdiff_t>(0, (it - entry_begin_.begin()) - 1));
  for (; e < entry_begin_.size() && entry_begin_[e] < end; ++e) {
    const std::int64_t lo = std::max(begin, entry_begin_[e]);
    const std::int64_t hi = std::min(end, entry_begin_[e] + entry_bytes_[e]);
    if (hi > lo) out.push_back({e, lo - entry_begin_[e], lo - begin, hi - lo});
  }
  return out;
}

}  // namespace tandem::gpu
