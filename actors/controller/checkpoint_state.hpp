// The controller's part of a step checkpoint, and how a resumed run reads it back.
//
//   CHECKPOINT_DIR/step_N/
//     weights/               policy rank 0's engine state: a Hugging Face checkpoint directory
//                            (config.json, tokenizer files, model.safetensors) with
//                            optimizer.safetensors beside it (AdamW moments by tensor name, step count)
//     ranks/                 every policy rank's attestation (one JSON file named after the
//                            rank): its version and weights digest
//     state.json             the controller's state (below)
//     metrics.jsonl          the run's metrics records so far (a copy of RUN_DIR/metrics.jsonl)
//     manifest.json          written last (orchestration/records/checkpoint_directory.h): every
//                            file and its size, the version, the ranks' digest, the retention metric
//
// state.json: {"format": "tandem-controller-state", "format_version": 1, "step": N (steps of both
// phases done), "version", "driver": the driver's snapshot (driver_snapshot: cursors and the
// batch generated ahead, trajectories whole, logprobs as float32 bit patterns so nothing is
// rounded), "records": the sizes of metrics.jsonl, generations.jsonl and the TensorBoard file at
// the step, "recipe": every key a resume must keep with its value, "fingerprint"}.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "actors/api/messages.hpp"
#include "orchestration/records/run_files.h"

namespace tandem {

/// What state.json holds.
struct controller_state {
  std::int64_t step = 0;  ///< steps of both phases done
  weight_version version = 0;
  driver_snapshot driver;
  records::record_sizes records;
  std::map<std::string, std::string> recipe;  ///< config::resume_values of the run's recipe
  std::string fingerprint;                    ///< config::recipe_fingerprint of `recipe`
};

/// A run's checkpointing (checkpointing.*), as `tandem run` resolved it.
struct checkpoint_plan {
  std::filesystem::path directory;  ///< absolute; empty: the run writes no step checkpoints
  std::int64_t save_period = 0;     ///< a checkpoint after every this many steps (and the last)
  std::optional<std::int64_t> keep_top_k;
  std::string metric_name;          ///< empty: the newest keep_top_k are kept
  bool higher_is_better = true;
  std::map<std::string, std::string> recipe;  ///< config::resume_values of the run's recipe
  std::string fingerprint;                    ///< config::recipe_fingerprint of `recipe`
  /// The checkpoint this run resumes from: its directory (CHECKPOINT_DIR/step_N) and state.
  struct resume_point {
    std::filesystem::path directory;
    controller_state state;
  };
  std::optional<resume_point> resume;
};

nlohmann::json to_json(const controller_state& s);

/// state.json read back; the error names the field that is missing or malformed
/// ("driver.ahead.trajectories[3].tokens: expected an array of integers").
std::optional<controller_state> controller_state_from_json(const nlohmann::json& j, std::string& error);

/// The value of checkpointing.metric_name in a step's metrics record: the record's key itself
/// ("validation/accuracy"), or NeMo-RL's spelling ("val:accuracy" for validation/accuracy,
/// "train:loss" for train/loss). None when the record has no finite number there.
std::optional<double> retention_metric(const nlohmann::json& record, const std::string& metric_name);

}  // namespace tandem
