// Which checkpoints a run keeps (checkpointing.keep_top_k, metric_name, higher_is_better, as
// NeMo-RL defines them): after each save, the newest checkpoint and the best keep_top_k of all
// (by the metric, or the newest keep_top_k without one) stay; every other is removed.
//
//   ranking by the metric: a checkpoint whose step recorded the metric ranks above one that did
//   not (a step without a validation pass has no val:accuracy); among those with it, the better
//   value first (higher or lower, by higher_is_better); a NaN ranks as recording none; ties go to
//   the newer step. keep_top_k null keeps every checkpoint.
//
// A pure function of the saved steps and their metric values, so a resumed run prunes exactly as
// the uninterrupted one would have.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace tandem::records {

struct saved_checkpoint {
  std::int64_t step = 0;        ///< the run's step it holds (unique)
  std::optional<double> value;  ///< the metric at that step, when the step recorded it
};

struct retention_rule {
  std::optional<std::int64_t> keep_top_k;  ///< >= 1; null: keep all
  bool by_metric = false;                  ///< checkpointing.metric_name is set
  bool higher_is_better = true;
};

/// The steps of `saved` to keep, ascending: the newest, and the best keep_top_k.
std::vector<std::int64_t> checkpoints_to_keep(const std::vector<saved_checkpoint>& saved, const retention_rule& rule);

/// The steps of `saved` to remove, ascending (those checkpoints_to_keep leaves out).
std::vector<std::int64_t> checkpoints_to_remove(const std::vector<saved_checkpoint>& saved, const retention_rule& rule);

}  // namespace tandem::records
