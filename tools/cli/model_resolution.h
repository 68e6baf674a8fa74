// From `policy.model_name` to the model's config and the plain facts the planner needs.
#pragma once

#include <filesystem>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "gpu/model/checkpoint.h"
#include "gpu/model/config.h"
#include "orchestration/config/config_error.h"
#include "orchestration/config/resolve.h"
#include "orchestration/topology/model_facts.h"

namespace tandem::cli {

/// Folder of the shipped configs: $TANDEM_CONFIG_DIR, else configs/ beside the binary's folder (a
/// bundle's, or the checkout's for build/tandem) when it holds models/, else the source tree's.
std::filesystem::path config_dir();

struct resolved_model {
  std::filesystem::path directory;  ///< holds config.json (and, for checkpoints, the weights)
  gpu::model_config config;
  topology::model_facts facts;
};

/// Finds the model (a directory with a config.json; a preset in configs/models/; a snapshot in
/// the local Hugging Face cache), parses it and applies the rules that need it. Errors are located
/// at policy.model_name or at the key that conflicts with the model.
std::optional<resolved_model> resolve_model(const config::resolved_recipe& r, config::config_errors& errors);

/// The directory `name` stands for, as policy.model_name would resolve it (a directory with a
/// config.json, a preset in configs/models/, a snapshot in the local Hugging Face cache), or a
/// message listing what was tried.
std::optional<std::filesystem::path> find_model_directory(const std::string& name, std::string& problem);

/// The checkpoint that `--model NAME` names (find_model_directory, then gpu::open_checkpoint for
/// `type`), or nullopt after printing "tandem COMMAND: <the one error>" to `err`.
std::optional<gpu::checkpoint> open_model_option(const std::string& command, const std::string& name, gpu::dtype type,
                                                 std::ostream& err);

/// The planner's facts about a parsed model.
topology::model_facts facts_of(const gpu::model_config& c, const std::string& name);

}  // namespace tandem::cli
