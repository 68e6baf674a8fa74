// The run's directory and files at the start of `tandem run`.
#include "tools/cli/run_preparation.h"

#include "orchestration/config/render.h"
#include "orchestration/records/run_directory.h"

namespace tandem::cli {

records::file_result<prepared_run> prepare_run(const config::resolved_recipe& asked, bool fresh) {
  auto dir = records::choose_run_directory(asked.config.logger.log_dir, fresh);
  if (!dir) return dir.error();
  prepared_run p{asked, {}, {}, "run directory: " + dir->path.string()};
  if (dir->moved()) {
    // As if the user had set it: recipe.yaml, run again, writes to this directory.
    const std::string path = dir->path.string();
    p.recipe.config.logger.log_dir = path;
    p.recipe.values.at("logger.log_dir") = {config::config_value{path}, config::source_location{"tandem run --fresh"}};
    p.first_line += " (" + dir->asked.string() + " holds another run)";
  }
  p.recipe_yaml = config::render_resolved(p.recipe);
  auto files = records::create_run_files(dir->path, p.recipe.config.logger.jsonl_enabled, p.recipe_yaml,
                                          p.recipe.config.logger.tensorboard_enabled);
  if (!files) return files.error();
  p.files = std::move(files.value());
  return p;
}

}  // namespace tandem::cli
