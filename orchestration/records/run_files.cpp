// Creating a run's files, and reopening them for a resumed run.
#include "orchestration/records/run_files.h"

#include <system_error>
#include <utility>
#include <vector>

#include "orchestration/records/whole_file.h"

namespace tandem::records {
namespace {

/// Removes the files a failed call made, and passes its error on.
file_error removing(const std::vector<std::filesystem::path>& made, file_error e) {
  for (const auto& p : made) {
    std::error_code ec;
    std::filesystem::remove(p, ec);
  }
  return e;
}

}  // namespace

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
  const auto undo = [&made](file_error e) { return removing(made, std::move(e)); };
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

record_sizes sizes_of(const run_files& files) {
  record_sizes out;
  if (files.metrics) out.metrics = files.metrics->size();
  if (files.generations) out.generations = files.generations->size();
  if (files.tensorboard) {
    out.tensorboard_file = files.tensorboard->path().filename().string();
    out.tensorboard = files.tensorboard->size();
  }
  return out;
}

file_result<run_files> reopen_run_files(const std::filesystem::path& directory, bool jsonl, std::string_view recipe_yaml,
                                        bool tensorboard, const record_sizes& sizes) {
  const auto metrics = directory / "metrics.jsonl";
  const auto generations = directory / "generations.jsonl";
  const auto log = directory / "controller.log";
  std::filesystem::path events;  // the checkpoint's events file; empty: a new one (or none)
  if (tensorboard && !sizes.tensorboard_file.empty()) {
    const std::filesystem::path name(sizes.tensorboard_file);
    if (name != name.filename() || name == "." || name == "..")
      return file_error{file_errc::cannot_create, "cannot reopen " + (directory / name).string() +
                                                      ": the checkpoint's events file is not a file of " + directory.string()};
    events = directory / name;
  }
  // Every file's size first, none cut or made yet: a refusal leaves every file as it was.
  if (jsonl) {
    if (auto e = record_file::check_reopen(metrics, sizes.metrics)) return *e;
    if (auto e = record_file::check_reopen(generations, sizes.generations)) return *e;
  }
  if (!events.empty())
    if (auto e = tensorboard_events::check_reopen(events, sizes.tensorboard)) return *e;

  // Then what can fail without cutting anything: controller.log (it keeps the lines of every
  // attempt), a new events file, recipe.yaml. The files this call made go again on an error; the
  // ones it opened close as `files` goes.
  run_files files;
  files.directory = directory;
  std::vector<std::filesystem::path> made;
  const auto undo = [&made](file_error e) { return removing(made, std::move(e)); };
  std::error_code ec;
  const bool log_exists = std::filesystem::exists(log, ec) || ec;  // when unsure, append_to says why not
  auto l = log_exists ? record_file::append_to(log) : record_file::create(log);
  if (!l) return l.error();
  if (!log_exists) made.push_back(log);
  files.log = std::move(l.value());
  if (tensorboard && events.empty()) {
    auto fresh = tensorboard_events::open(directory);
    if (!fresh) return undo(fresh.error());
    made.push_back(fresh.value()->path());
    files.tensorboard = std::move(fresh.value());
  }
  if (auto e = write_whole_file(directory / "recipe.yaml", recipe_yaml)) return undo(*e);

  // Last the cuts, each checked above: only an I/O error fails one now.
  if (jsonl) {
    auto m = record_file::reopen(metrics, sizes.metrics);
    if (!m) return undo(m.error());
    files.metrics = std::move(m.value());
    auto g = record_file::reopen(generations, sizes.generations);
    if (!g) return undo(g.error());
    files.generations = std::move(g.value());
  }
  if (!events.empty()) {
    auto t = tensorboard_events::reopen(events, sizes.tensorboard);
    if (!t) return undo(t.error());
    files.tensorboard = std::move(t.value());
  }
  return files;
}

}  // namespace tandem::records
