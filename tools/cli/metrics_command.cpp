// `tandem metrics export|check|tensorboard RUN_DIR ...`: a run's metrics.jsonl
// (orchestration/records/metrics_export.h) as NeMo-RL's JSON, checked against metric gates
// (metric_check.h), or converted to a TensorBoard event file (tensorboard_events.h).
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "orchestration/records/metric_check.h"
#include "orchestration/records/metrics_export.h"
#include "orchestration/records/tensorboard_events.h"
#include "orchestration/records/whole_file.h"
#include "tools/cli/arguments.h"
#include "tools/cli/commands.h"

namespace tandem::cli {
namespace {

namespace fs = std::filesystem;
namespace tr = tandem::records;

constexpr const char* usage =
    "usage: tandem metrics export RUN_DIR [-o FILE]\n"
    "       tandem metrics check RUN_DIR EXPR...\n"
    "       tandem metrics tensorboard RUN_DIR [--out DIR]\n";

/// The run's series, or nullopt with the reason on `err`.
std::optional<tr::metric_table> read_table(const std::string& command, const std::string& run_dir, std::ostream& err) {
  auto t = tr::read_metrics(tr::metrics_file_of(run_dir));
  if (!t) {
    err << "tandem metrics " << command << ": " << t.error().message << "\n";
    return std::nullopt;
  }
  return std::move(*t);
}

int export_metrics(const args& a, std::ostream& out, std::ostream& err) {
  const parsed_options s = parse_options(a, one_positional("RUN_DIR", {"-o"}));
  if (!s.problem.empty()) {
    err << "tandem metrics export: " << s.problem << "\n" << usage;
    return exit_usage;
  }
  const auto table = read_table("export", s.positional[0], err);
  if (!table) return exit_refused;
  const std::string text = tr::nemo_rl_json(*table) + "\n";
  const auto file = s.values.find("-o");
  if (file == s.values.end()) {
    out << text;
    return exit_ok;
  }
  if (auto e = tr::write_whole_file(file->second, text)) {
    err << "tandem metrics export: " << e->message << "\n";
    return exit_refused;
  }
  out << "wrote " << table->size() << " metrics over " << tr::values_by_step(*table).size() << " steps to "
      << file->second << "\n";
  return exit_ok;
}

int check_metrics(const args& a, std::ostream& out, std::ostream& err) {
  if (a.size() < 2) {
    err << "tandem metrics check: " << (a.empty() ? "missing RUN_DIR and EXPR" : "missing EXPR") << "\n" << usage;
    return exit_usage;
  }
  // Every expression is parsed before the file is read: a typo is a usage error, whatever the run.
  std::vector<tr::metric_check> checks;
  bool malformed = false;
  for (std::size_t i = 1; i < a.size(); ++i) {
    auto c = tr::parse_check(a[i]);
    if (c) {
      checks.push_back(std::move(*c));
    } else {
      err << "tandem metrics check: " << c.error().message << "\n";
      malformed = true;
    }
  }
  if (malformed) {
    err << "(see `tandem help metrics` for what a check may say)\n";
    return exit_usage;
  }
  const auto table = read_table("check", a[0], err);
  if (!table) return exit_refused;
  std::size_t failed = 0;
  for (const auto& c : checks) {
    auto o = tr::evaluate(c, *table);
    if (!o) {
      ++failed;
      out << "FAILED " << c.text << ": " << o.error().message << "\n";
    } else if (!o->holds) {
      ++failed;
      out << "FAILED " << c.text << " (" << o->values(c) << ")\n";
    } else {
      out << "ok     " << c.text << " (" << o->values(c) << ")\n";
    }
  }
  if (failed == 0) return exit_ok;
  err << "tandem metrics check: " << failed << " of " << checks.size() << (checks.size() == 1 ? " check" : " checks")
      << " failed (" << tr::metrics_file_of(a[0]).string() << ")\n";
  return exit_refused;
}

/// The first TensorBoard events file in `dir`, if any.
std::optional<fs::path> events_file_in(const fs::path& dir) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().filename().string().find("tfevents") != std::string::npos) return it->path();
  return std::nullopt;
}

int tensorboard_metrics(const args& a, std::ostream& out, std::ostream& err) {
  const parsed_options s = parse_options(a, one_positional("RUN_DIR", {"--out"}));
  if (!s.problem.empty()) {
    err << "tandem metrics tensorboard: " << s.problem << "\n" << usage;
    return exit_usage;
  }
  const std::string& run_dir = s.positional[0];
  const auto table = read_table("tensorboard", run_dir, err);
  if (!table) return exit_refused;
  const fs::path metrics = tr::metrics_file_of(run_dir);
  const fs::path dir = s.values.count("--out") ? fs::path(s.values.at("--out"))
                                               : (metrics.has_parent_path() ? metrics.parent_path() : fs::path("."));
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    err << "tandem metrics tensorboard: cannot create directory " << dir.string() << ": " << ec.message() << "\n";
    return exit_refused;
  }
  // TensorBoard reads every events file of a directory: a second conversion would show each step twice.
  if (const auto old = events_file_in(dir)) {
    err << "tandem metrics tensorboard: " << dir.string() << " already holds TensorBoard events ("
        << old->filename().string() << "); remove them or pass --out with another directory\n";
    return exit_refused;
  }
  auto events = tr::tensorboard_events::open(dir);
  if (!events) {
    err << "tandem metrics tensorboard: " << events.error().message << "\n";
    return exit_refused;
  }
  const auto steps = tr::values_by_step(*table);
  for (const auto& [step, scalars] : steps) {
    if (auto e = (*events)->add_scalars(step, scalars)) {
      const fs::path path = (*events)->path();
      events.value().reset();
      fs::remove(path, ec);  // a conversion is all the steps or no file
      err << "tandem metrics tensorboard: " << e->message << " (the partial file is removed)\n";
      return exit_refused;
    }
  }
  out << "wrote " << steps.size() << " steps of " << table->size() << " metrics to " << (*events)->path().string()
      << " (view: tensorboard --logdir " << dir.string() << ")\n";
  return exit_ok;
}

}  // namespace

int metrics_command(const args& a, std::ostream& out, std::ostream& err) {
  if (a.empty()) {
    err << "tandem metrics: missing subcommand\n" << usage;
    return exit_usage;
  }
  const args rest(a.begin() + 1, a.end());
  if (a[0] == "export") return export_metrics(rest, out, err);
  if (a[0] == "check") return check_metrics(rest, out, err);
  if (a[0] == "tensorboard") return tensorboard_metrics(rest, out, err);
  err << "tandem metrics: unknown subcommand '" << a[0] << "' (export, check, tensorboard)\n" << usage;
  return exit_usage;
}

}  // namespace tandem::cli
