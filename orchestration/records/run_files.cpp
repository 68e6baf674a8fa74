// Creating a run's files.
#include "orchestration/records/run_files.h"

#include <system_error>
#include <vector>

#include "orchestration/records/whole_file.h"

namespace tandem::records {

std::optional<file_error> run_files::failure() const {
  for (const auto* f : {&metrics, &generations, &log})
    if (*f)
      if (auto e = (*f)->failure()) return e;
  if (tensorboard && tensorboard->failure()) return tensorboard->failure();
  return std::nullopt;
}

file_result<run_files> create_run_files(const std::filesystem::path& directory, bool jsonl, std::string_view recipe_yaml,
                                        bool tensorboard) {
  run_files files;
  files.directory = directory;
  std::vector<std::filesystem::path> made;
  const auto undo = [&made](file_error e) {
    for (const auto& p : made) {
      std::error_code ec;
      std::filesystem::remove(p, ec);
    }
    return e;
  };
  const auto create = [&](const char* name, std::shared_ptr<record_file>& into) -> std::optional<file_error> {
    auto f = record_file::create(directory / name);
    if (!f) return f.error();
    made.push_back(directory / name);
    into = std::move(f.value());
    return std::nullopt;
  };
  if (jsonl) {
    if (auto e = create("metrics.jsonl", files.metrics)) return undo(*e);
    if (auto e = create("generations.jsonl", files.generations)) return undo(*e);
  }
  if (tensorboard) {
    auto events = tensorboard_events::open(directory);
    if (!events) return undo(events.error());
    made.push_back(events.value()->path());
    files.tensorboard = std::move(events.value());
  }
  if (auto e = create("controller.log", files.log)) return undo(*e);
  if (auto e = write_whole_file(directory / "recipe.yaml", recipe_yaml)) return undo(*e);
  return files;
}

}  // namespace tandem::records
