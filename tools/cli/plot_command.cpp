// `tandem plot RUN_DIR [-o FILE.png] [--metrics a,b,...]`: a PNG of a run's metrics over steps,
// one panel per metric, drawn by gnuplot (Debian: gnuplot-nox). The series go to a data file and
// the commands to a script, both in a temporary directory; gnuplot runs the script (its output
// kept in a log there, shown when it fails) and draws into FILE.png.tmp, renamed over FILE.png
// when done, so FILE.png is whole or absent. The terminal is pngcairo where gnuplot has it, else
// png.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "orchestration/records/file_error.h"
#include "orchestration/records/metric_check.h"
#include "orchestration/records/metrics_export.h"
#include "tools/cli/arguments.h"
#include "tools/cli/commands.h"

extern char** environ;

namespace tandem::cli {
namespace {

namespace fs = std::filesystem;
namespace tr = tandem::records;

constexpr const char* usage = "usage: tandem plot RUN_DIR [-o FILE.png] [--metrics NAME,NAME,...]\n";

/// What a default plot shows: the metrics whose name holds one of these, in this order.
const std::vector<std::string>& plotted_kinds() {
  static const std::vector<std::string> k = {"reward", "accuracy", "loss", "error"};
  return k;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

/// The metrics of `table` a default plot shows: by kind (a name of several kinds under its first),
/// then by name. Timings (timing/...: seconds, such as timing/train/reward_calculation) are not a
/// kind's even when their names hold one.
std::vector<std::string> default_metrics(const tr::metric_table& table) {
  std::vector<std::string> names;
  for (const auto& kind : plotted_kinds())
    for (const auto& [name, series] : table) {
      const std::string l = lower(name);
      if (l.starts_with("timing/") || l.find(kind) == std::string::npos) continue;
      const auto first = std::find_if(plotted_kinds().begin(), plotted_kinds().end(),
                                      [&](const std::string& k) { return l.find(k) != std::string::npos; });
      if (*first == kind) names.push_back(name);
    }
  return names;
}

/// `text` on one line: control characters (a newline would end a script line) become spaces.
std::string one_line(const std::string& text) {
  std::string s = text;
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  return s;
}

/// `text` as a gnuplot single-quoted string (a quote is written twice), on one line.
std::string quoted(const std::string& text) {
  std::string s = "'";
  for (const char c : one_line(text)) s += c == '\'' ? std::string("''") : std::string(1, c);
  return s + "'";
}

/// A temporary directory removed with its contents when this goes out of scope.
class scratch_dir {
 public:
  scratch_dir() {
    std::string pattern = (fs::temp_directory_path() / "tandem-plot-XXXXXX").string();
    if (::mkdtemp(pattern.data())) path_ = pattern;
    else reason_ = errno;
  }
  ~scratch_dir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  scratch_dir(const scratch_dir&) = delete;
  scratch_dir& operator=(const scratch_dir&) = delete;
  const fs::path& path() const { return path_; }
  int reason() const { return reason_; }

 private:
  fs::path path_;
  int reason_ = 0;
};

std::string script(const tr::metric_table& table, const std::vector<std::string>& metrics, const fs::path& data,
                   const fs::path& png, const std::string& title) {
  const std::size_t columns = metrics.size() > 1 ? 2 : 1;
  const std::size_t rows = (metrics.size() + columns - 1) / columns;
  const std::string size = " size " + std::to_string(640 * columns) + "," + std::to_string(360 * rows);
  std::ostringstream s;
  s << "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
    << "  set terminal pngcairo" << size << "\n"
    << "} else {\n"
    << "  set terminal png" << size << "\n"
    << "}\n"
    << "set termoption noenhanced\n"
    << "set output " << quoted(png.string()) << "\n"
    << "set multiplot layout " << rows << "," << columns << " title " << quoted(title) << "\n"
    << "set grid\n"
    << "set key off\n"
    << "set xlabel 'step'\n";
  for (std::size_t i = 0; i < metrics.size(); ++i) {
    const auto& series = table.at(metrics[i]);
    s << "set title " << quoted(metrics[i]) << "\n";
    // A lone step would give gnuplot an empty x range: widen it by one step each way. Few steps
    // get a tic per step (no fractional steps on the axis).
    const std::int64_t first = series.begin()->first, last = series.rbegin()->first;
    if (first == last) s << "set xrange [" << first - 1 << ":" << last + 1 << "]\n";
    else s << "set autoscale x\n";
    s << (last - first <= 10 ? "set xtics 1\n" : "set xtics autofreq\n");
    s << "plot " << quoted(data.string()) << " index " << i << " using 1:2 with linespoints pointtype 7 pointsize 0.6\n";
  }
  s << "unset multiplot\n"
    << "set output\n";
  return s.str();
}

/// Each metric's (step, value) lines, blocks apart by two blank lines (gnuplot's `index`).
std::string data_blocks(const tr::metric_table& table, const std::vector<std::string>& metrics) {
  std::ostringstream s;
  for (std::size_t i = 0; i < metrics.size(); ++i) {
    if (i > 0) s << "\n\n";
    s << "# " << one_line(metrics[i]) << "\n";
    for (const auto& [step, value] : table.at(metrics[i])) s << step << "\t" << tr::format_number(value) << "\n";
  }
  return s.str();
}

/// Writes `text` to `path`; false when it could not.
bool write_text(const fs::path& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  f.close();
  return !f.fail();
}

/// Runs `gnuplot SCRIPT` with its output in LOG; the empty string when it succeeded, else why not.
std::string run_gnuplot(const fs::path& script_file, const fs::path& log) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::string program = "gnuplot", script_arg = script_file.string();
  char* argv[] = {program.data(), script_arg.data(), nullptr};
  pid_t pid = 0;
  const int spawned = ::posix_spawnp(&pid, "gnuplot", &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned == ENOENT) return "gnuplot is not installed (not found on PATH; Debian: apt-get install gnuplot-nox)";
  if (spawned != 0) return "cannot start gnuplot: " + tr::os_reason(spawned);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return "cannot wait for gnuplot: " + tr::os_reason(errno);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return {};
  std::ifstream in(log);
  std::stringstream said;
  said << in.rdbuf();
  const std::string how = WIFEXITED(status) ? "exited with status " + std::to_string(WEXITSTATUS(status))
                                            : "was killed by signal " + std::to_string(WTERMSIG(status));
  return "gnuplot " + how + (said.str().empty() ? std::string() : ":\n" + said.str());
}

}  // namespace

int plot_command(const args& a, std::ostream& out, std::ostream& err) {
  const parsed_options p = parse_options(a, one_positional("RUN_DIR", {"-o", "--metrics"}));
  if (!p.problem.empty()) {
    err << "tandem plot: " << p.problem << "\n" << usage;
    return exit_usage;
  }
  const std::string& run_dir = p.positional[0];
  const auto option = [&p](const std::string& name) {
    const auto it = p.values.find(name);
    return it == p.values.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
  const std::optional<std::string> output = option("-o"), wanted = option("--metrics");
  std::vector<std::string> metrics;
  if (wanted) {
    std::stringstream list(*wanted);
    for (std::string name; std::getline(list, name, ',');) {
      if (name.empty()) {
        err << "tandem plot: --metrics '" << *wanted << "' has an empty name\n" << usage;
        return exit_usage;
      }
      metrics.push_back(name);
    }
    if (metrics.empty()) {
      err << "tandem plot: --metrics names no metric\n" << usage;
      return exit_usage;
    }
  }

  const fs::path metrics_file = tr::metrics_file_of(run_dir);
  auto table = tr::read_metrics(metrics_file);
  if (!table) {
    err << "tandem plot: " << table.error().message << "\n";
    return exit_refused;
  }
  for (const auto& name : metrics)
    if (!table->count(name)) {
      err << "tandem plot: no metric '" << name << "' in " << metrics_file.string()
          << " (metrics: " << tr::metric_names(*table) << ")\n";
      return exit_refused;
    }
  if (metrics.empty()) metrics = default_metrics(*table);
  if (metrics.empty()) {
    err << "tandem plot: no reward, accuracy, loss or error metric in " << metrics_file.string()
        << " (metrics: " << tr::metric_names(*table) << "); name some with --metrics\n";
    return exit_refused;
  }

  const fs::path png = output ? fs::path(*output) : metrics_file.parent_path() / "metrics.png";
  const fs::path partial = png.string() + ".tmp";
  std::error_code ec;
  if (png.has_parent_path() && !fs::is_directory(png.parent_path(), ec)) {
    err << "tandem plot: cannot write " << png.string() << ": " << png.parent_path().string() << " is not a directory\n";
    return exit_refused;
  }
  const scratch_dir scratch;
  if (scratch.path().empty()) {
    err << "tandem plot: cannot create a temporary directory in " << fs::temp_directory_path().string() << ": "
        << tr::os_reason(scratch.reason()) << "\n";
    return exit_refused;
  }
  const fs::path data = scratch.path() / "metrics.dat", script_file = scratch.path() / "plot.gp";
  const std::string title = metrics_file.parent_path().filename().string();
  if (!write_text(data, data_blocks(*table, metrics)) ||
      !write_text(script_file, script(*table, metrics, data, partial, title.empty() ? metrics_file.string() : title))) {
    err << "tandem plot: cannot write the temporary files in " << scratch.path().string() << "\n";
    return exit_refused;
  }
  if (const std::string problem = run_gnuplot(script_file, scratch.path() / "gnuplot.log"); !problem.empty()) {
    fs::remove(partial, ec);
    err << "tandem plot: " << problem << (problem.ends_with("\n") ? "" : "\n");
    return exit_refused;
  }
  if (fs::file_size(partial, ec) == 0 || ec) {
    fs::remove(partial, ec);
    err << "tandem plot: gnuplot wrote no image to " << partial.string() << "\n";
    return exit_refused;
  }
  fs::rename(partial, png, ec);
  if (ec) {
    fs::remove(partial, ec);
    err << "tandem plot: cannot write " << png.string() << ": " << ec.message() << "\n";
    return exit_refused;
  }
  out << "plotted ";
  for (std::size_t i = 0; i < metrics.size(); ++i) out << (i ? ", " : "") << metrics[i];
  out << " of " << metrics_file.string() << " to " << png.string() << "\n";
  return exit_ok;
}

}  // namespace tandem::cli
