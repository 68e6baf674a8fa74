// Which checkpoints a run keeps (checkpoint_retention.h).
#include "orchestration/records/checkpoint_retention.h"

#include <algorithm>
#include <cmath>

namespace tandem::records {
namespace {

/// Whether `a` ranks above `b` (see the header).
bool better(const saved_checkpoint& a, const saved_checkpoint& b, const retention_rule& rule) {
  if (rule.by_metric) {
    const bool has_a = a.value && !std::isnan(*a.value), has_b = b.value && !std::isnan(*b.value);
    if (has_a != has_b) return has_a;
    if (has_a && *a.value != *b.value) return rule.higher_is_better ? *a.value > *b.value : *a.value < *b.value;
  }
  return a.step > b.step;
}

}  // namespace

std::vector<std::int64_t> checkpoints_to_keep(const std::vector<saved_checkpoint>& saved, const retention_rule& rule) {
  std::vector<std::int64_t> keep;
  if (saved.empty()) return keep;
  if (!rule.keep_top_k) {
    for (const auto& c : saved) keep.push_back(c.step);
  } else {
    std::vector<saved_checkpoint> ranked = saved;
    std::sort(ranked.begin(), ranked.end(), [&](const auto& a, const auto& b) { return better(a, b, rule); });
    const auto k = static_cast<std::size_t>(std::max<std::int64_t>(1, *rule.keep_top_k));
    for (std::size_t i = 0; i < ranked.size() && i < k; ++i) keep.push_back(ranked[i].step);
    const auto newest = std::max_element(saved.begin(), saved.end(), [](const auto& a, const auto& b) { return a.step < b.step; });
    keep.push_back(newest->step);
  }
  std::sort(keep.begin(), keep.end());
  keep.erase(std::unique(keep.begin(), keep.end()), keep.end());
  return keep;
}

std::vector<std::int64_t> checkpoints_to_remove(const std::vector<saved_checkpoint>& saved, const retention_rule& rule) {
  const auto keep = checkpoints_to_keep(saved, rule);
  std::vector<std::int64_t> out;
  for (const auto& c : saved)
    if (!std::binary_search(keep.begin(), keep.end(), c.step)) out.push_back(c.step);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace tandem::records
