// The run's directory and files at the start of `tandem run` (run_preparation.h).
#include "tools/cli/run_preparation.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "orchestration/config/recipe_fingerprint.h"
#include "orchestration/config/render.h"
#include "orchestration/records/checkpoint_directory.h"
#include "orchestration/records/run_directory.h"

namespace tandem::cli {
namespace {

namespace fs = std::filesystem;

/// checkpointing.checkpoint_dir, absolute: relative to the run's directory.
fs::path checkpoint_directory(const config::recipe_config& c, const fs::path& run_dir) {
  const fs::path asked(c.checkpointing.checkpoint_dir);
  std::error_code ec;
  const fs::path p = asked.is_absolute() ? asked : run_dir / asked;
  const fs::path abs = fs::absolute(p, ec);
  return (ec ? p : abs).lexically_normal();
}

checkpoint_plan plan_of(const config::resolved_recipe& r, const fs::path& run_dir) {
  checkpoint_plan plan;
  const auto& k = r.config.checkpointing;
  plan.recipe = config::resume_values(r);
  plan.fingerprint = config::recipe_fingerprint(plan.recipe);
  if (!k.enabled) return plan;
  plan.directory = checkpoint_directory(r.config, run_dir);
  plan.save_period = k.save_period;
  plan.keep_top_k = k.keep_top_k;
  plan.metric_name = k.metric_name.value_or("");
  plan.higher_is_better = k.higher_is_better;
  return plan;
}

records::file_error refusal(const std::string& text) { return {records::file_errc::holds_another_run, text}; }

/// The newest complete checkpoint in `plan.directory`, read and checked against this recipe;
/// none when there is none (then `notes` says which were skipped).
records::file_result<std::optional<checkpoint_plan::resume_point>> newest_checkpoint(const checkpoint_plan& plan,
                                                                                     std::vector<std::string>& notes) {
  const records::checkpoint_listing listing = records::list_checkpoints(plan.directory);
  for (const auto& s : listing.skipped) notes.push_back("checkpoint not used: " + s);
  if (listing.complete.empty()) return std::optional<checkpoint_plan::resume_point>{};
  const records::checkpoint_entry& newest = listing.complete.back();
  const fs::path state_file = newest.path / "state.json";
  std::ifstream in(state_file);
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, false);
  if (!in || j.is_discarded()) return refusal(state_file.string() + ": cannot be read as JSON");
  std::string error;
  auto state = controller_state_from_json(j, error);
  if (!state) return refusal(state_file.string() + ": " + error);
  if (state->step != newest.step)
    return refusal(state_file.string() + ": holds step " + std::to_string(state->step) + ", its directory says " +
                   std::to_string(newest.step));
  const std::vector<std::string> diff = config::differing_keys(state->recipe, plan.recipe);
  if (!diff.empty()) {
    std::string lines;
    for (const auto& d : diff) lines += "\n  " + d;
    return refusal(newest.path.string() + " was made with another recipe; a resumed run keeps every key but the run's "
                                          "length, logging, checkpointing and placement. Differing:" +
                   lines + "\n(restore them, or pass --fresh to start a new run)");
  }
  return std::optional<checkpoint_plan::resume_point>{checkpoint_plan::resume_point{newest.path, std::move(*state)}};
}

}  // namespace

records::file_result<prepared_run> prepare_run(const config::resolved_recipe& asked, bool fresh) {
  // A run to resume: the directory asked for holds records and a complete checkpoint.
  const fs::path asked_dir(asked.config.logger.log_dir);
  if (asked.config.checkpointing.enabled && !fresh && !records::records_in(asked_dir).empty()) {
    prepared_run p{asked, {}, {}, "", {}, plan_of(asked, asked_dir)};
    auto point = newest_checkpoint(p.checkpoints, p.notes);
    if (!point) return point.error();
    if (*point) {
      p.checkpoints.resume = std::move(**point);
      p.recipe_yaml = config::render_resolved(p.recipe);
      const auto& c = p.recipe.config;
      auto files = records::reopen_run_files(asked_dir, c.logger.jsonl_enabled, p.recipe_yaml, c.logger.tensorboard_enabled,
                                             p.checkpoints.resume->state.records);
      if (!files) return files.error();
      p.files = std::move(files.value());
      p.first_line = "run directory: " + asked_dir.string() + " (resuming from " +
                     p.checkpoints.resume->directory.string() + ")";
      return p;
    }
  }
  auto dir = records::choose_run_directory(asked.config.logger.log_dir, fresh);
  if (!dir) return dir.error();
  prepared_run p{asked, {}, {}, "run directory: " + dir->path.string(), {}, {}};
  if (dir->moved()) {
    // As if the user had set it: recipe.yaml, run again, writes to this directory.
    const std::string path = dir->path.string();
    p.recipe.config.logger.log_dir = path;
    p.recipe.values.at("logger.log_dir") = {config::config_value{path}, config::source_location{"tandem run --fresh"}};
    p.first_line += " (" + dir->asked.string() + " holds another run)";
  }
  p.checkpoints = plan_of(p.recipe, dir->path);
  p.recipe_yaml = config::render_resolved(p.recipe);
  auto files = records::create_run_files(dir->path, p.recipe.config.logger.jsonl_enabled, p.recipe_yaml,
                                          p.recipe.config.logger.tensorboard_enabled);
  if (!files) return files.error();
  p.files = std::move(files.value());
  return p;
}

}  // namespace tandem::cli
