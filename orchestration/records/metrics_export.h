// A run's metrics.jsonl read back as a table of series, and written as NeMo-RL's metrics JSON.
//
// metrics.jsonl holds one JSON object per line, one line per step: "step" (an integer >= 0; step 0
// holds validation before the first step, grpo.val_at_start) and numeric fields, possibly nested:
// {"step":1,"loss":0.1,"refit":{"bytes":123}}. A series is named by its path, nested keys joined
// with '/' ("refit/bytes"); names that already hold '/' ("train/loss") are kept as they are.
// Strings, booleans, arrays and null (how a NaN is written) are not series and are skipped; an
// object with no numbers adds nothing. Blank lines are skipped.
//
// NeMo-RL's form is {"metric": {"step": value}}: step keys as strings, here in step order under
// metric names in sorted order, values as JSON reals.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "orchestration/result.h"

namespace tandem::records {

enum class metrics_errc {
  cannot_read,       ///< the metrics file could not be opened or read
  malformed_record,  ///< a line is not a JSON object with an integer "step" >= 0
  duplicate_step,    ///< two lines hold the same step
  duplicate_metric,  ///< one line names a series twice ("a/b" and {"a":{"b":..}})
  bad_expression,    ///< a check expression does not parse (metric_check.h)
  missing_metric,    ///< a check names a metric the file does not hold
  missing_step,      ///< a check names a step its metric has no value for
};

/// The name of a code ("malformed_record").
const char* to_string(metrics_errc code);

struct metrics_error {
  metrics_errc code = metrics_errc::malformed_record;
  std::string message;  ///< the whole sentence, naming the file:line, metric or step
};

/// A value or the reason there is none (orchestration/result.h).
template <class T>
using metrics_result = result_or<T, metrics_error>;

/// One metric's values by step.
using metric_series = std::map<std::int64_t, double>;
/// Every series of a run by name ("train/loss", "refit/bytes").
using metric_table = std::map<std::string, metric_series>;

/// The metrics file a command argument names: DIR/metrics.jsonl for a directory, else the path
/// itself (a metrics file given directly).
std::filesystem::path metrics_file_of(const std::filesystem::path& run_dir_or_file);

/// The series of `text`, the contents of a metrics file that messages call `file`. Errors:
/// malformed_record ("FILE:3: not JSON: ..."; "FILE:3: no \"step\" (a whole number >= 0)"),
/// duplicate_step ("FILE:5: step 2 again (first at line 2; two runs in one file?)"), duplicate_metric.
metrics_result<metric_table> parse_metrics(std::string_view text, const std::string& file);

/// Reads and parses the file at `path`. Errors: cannot_read ("cannot read PATH: No such file or
/// directory"), then those of parse_metrics.
metrics_result<metric_table> read_metrics(const std::filesystem::path& path);

/// The table in NeMo-RL's form, indented by `indent` spaces (-1: one line), without a newline.
std::string nemo_rl_json(const metric_table& table, int indent = 2);

/// The table by step: every step that has a value, with its (name, value) pairs in name order.
std::map<std::int64_t, std::vector<std::pair<std::string, double>>> values_by_step(const metric_table& table);

/// The names of the table, comma-separated, the first `limit` and "... (N more)" after them.
std::string metric_names(const metric_table& table, std::size_t limit = 20);

}  // namespace tandem::records
