// Choosing and making a run's directory.
#include "orchestration/records/run_directory.h"

#include <optional>
#include <system_error>

namespace tandem::records {
namespace {

namespace fs = std::filesystem;

constexpr int last_sibling = 999;

/// `p` without a trailing separator ("logs/x/" -> "logs/x"), so siblings are "logs/x.2".
fs::path without_trailing_separator(const fs::path& p) {
  const fs::path n = p.lexically_normal();
  if (!n.has_filename() && n.has_relative_path()) return n.parent_path();
  return n;
}

/// Makes `dir` and its parents; the deepest part of it that exists must be a directory.
std::optional<file_error> make_directory(const fs::path& dir) {
  for (fs::path q = dir; !q.empty(); q = q.parent_path()) {
    std::error_code ec;
    const fs::file_status st = fs::status(q, ec);
    if (fs::exists(st)) {
      if (!fs::is_directory(st)) return file_error{file_errc::not_a_directory, q.string() + ": not a directory"};
      break;
    }
    if (q == q.parent_path()) break;
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return file_error{file_errc::cannot_create_directory, "cannot create " + dir.string() + ": " + ec.message()};
  if (!fs::is_directory(dir, ec)) return file_error{file_errc::not_a_directory, dir.string() + ": not a directory"};
  return std::nullopt;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

const std::vector<std::string>& run_record_names() {
  static const std::vector<std::string> names = {"recipe.yaml", "metrics.jsonl", "generations.jsonl", "controller.log",
                                                 "metrics.png", "final_weights"};
  return names;
}

std::vector<std::string> records_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& name : run_record_names()) {
    std::error_code ec;
    if (fs::exists(fs::symlink_status(dir / name, ec))) out.push_back(name);
  }
  return out;
}

file_result<run_directory> choose_run_directory(const fs::path& log_dir, bool fresh) {
  if (log_dir.empty())
    return file_error{file_errc::cannot_create_directory, "logger.log_dir is empty: it names the run's directory"};
  const fs::path asked = without_trailing_separator(log_dir);
  if (auto e = make_directory(asked)) return *e;
  std::vector<std::string> held = records_in(asked);
  if (held.empty()) return run_directory{asked, asked, {}};
  if (!fresh)
    return file_error{file_errc::holds_another_run,
                      asked.string() + " holds the records of another run (" + joined(held) +
                          "); pass --fresh to start this run in a new directory, or set logger.log_dir"};
  for (int n = 2; n <= last_sibling; ++n) {
    const fs::path sibling = asked.string() + "." + std::to_string(n);
    std::error_code ec;
    const fs::file_status st = fs::status(sibling, ec);
    if (fs::exists(st) && !fs::is_directory(st)) continue;  // a file of that name is not ours to use
    if (fs::is_directory(st) && !records_in(sibling).empty()) continue;
    if (auto e = make_directory(sibling)) return *e;
    return run_directory{sibling, asked, std::move(held)};
  }
  const std::string last = asked.string() + "." + std::to_string(last_sibling);
  return file_error{file_errc::no_free_directory, asked.string() + " holds the records of another run, and " + asked.string() +
                                                      ".2 to " + last + " are taken too; set logger.log_dir"};
}

}  // namespace tandem::records
