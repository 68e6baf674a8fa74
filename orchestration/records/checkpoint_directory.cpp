// Step checkpoints on disk (checkpoint_directory.h): begin, the synced commit, the listing that
// trusts only a valid manifest, and the manifest-first removal.
#include "orchestration/records/checkpoint_directory.h"

#include <fcntl.h>
#include <stdio.h>  // renameat2, RENAME_NOREPLACE, RENAME_EXCHANGE
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <iterator>
#include <utility>

#include "orchestration/records/whole_file.h"

namespace tandem::records {
namespace {

namespace fs = std::filesystem;

constexpr const char* manifest_name = "manifest.json";
constexpr const char* manifest_temp_name = "manifest.json.tmp";  // write_whole_file's temporary
constexpr const char* partial_suffix = ".partial";
constexpr const char* format_name = "tandem-checkpoint";
constexpr int format_version = 1;

/// A regular file found under the partial directory: its path relative to it ('/') and size.
using listed_file = std::pair<std::string, std::uint64_t>;

/// "cannot sync PATH: REASON".
file_error sync_error(const fs::path& p, int reason) {
  return os_file_error(file_errc::cannot_write, "cannot sync", p.string(), reason);
}

/// Opens `p` read-only (a directory when `directory`) and fsyncs it; returns its size.
file_result<std::uint64_t> sync_path(const fs::path& p, bool directory) {
  const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC | (directory ? O_DIRECTORY : 0));
  if (fd < 0) return sync_error(p, errno);
  struct stat st {};
  const bool ok = ::fsync(fd) == 0 && ::fstat(fd, &st) == 0;
  const int reason = errno;
  ::close(fd);
  if (!ok) return sync_error(p, reason);
  return static_cast<std::uint64_t>(st.st_size);
}

std::optional<file_error> sync_directory(const fs::path& p) {
  auto r = sync_path(p, true);
  if (!r) return r.error();
  return std::nullopt;
}

/// `p` without a trailing separator ("x/step_4.partial/" -> "x/step_4.partial").
fs::path without_trailing_separator(const fs::path& p) {
  const fs::path n = p.lexically_normal();
  if (!n.has_filename() && n.has_relative_path()) return n.parent_path();
  return n;
}

/// N of `name` when it is exactly checkpoint_name(N) + `suffix` (N >= 0, no leading zeros).
std::optional<std::int64_t> step_of(const std::string& name, const std::string& suffix) {
  const std::string prefix = "step_";
  if (name.size() <= prefix.size() + suffix.size() || !name.starts_with(prefix) || !name.ends_with(suffix)) return std::nullopt;
  const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  if (digits.size() > 1 && digits[0] == '0') return std::nullopt;
  return std::stoll(digits);
}

/// Every directory under `partial` (itself included, deepest first) and every regular file under
/// it but the manifest (and its temporary), each file fsynced as it is found.
std::optional<file_error> sync_files(const fs::path& partial, std::vector<fs::path>& dirs, std::vector<listed_file>& files) {
  dirs.push_back(partial);
  std::error_code ec;
  fs::recursive_directory_iterator it(partial, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const fs::file_status st = it->symlink_status(ec);
    if (ec) break;
    if (fs::is_directory(st)) dirs.push_back(it->path());
    if (!fs::is_regular_file(st)) continue;  // symbolic links and the like are not part of a checkpoint
    const std::string rel = it->path().lexically_relative(partial).generic_string();
    if (rel == manifest_name || rel == manifest_temp_name) continue;
    auto size = sync_path(it->path(), false);
    if (!size) return size.error();
    files.emplace_back(rel, *size);
  }
  if (ec) return os_file_error(file_errc::cannot_write, "cannot list", partial.string(), ec.value());
  return std::nullopt;
}

/// Fsyncs every directory of `dirs`, the deepest first, so each one's entries are durable
/// before its parent's.
std::optional<file_error> sync_directories(std::vector<fs::path> dirs) {
  const auto depth = [](const fs::path& p) { return std::distance(p.begin(), p.end()); };
  std::stable_sort(dirs.begin(), dirs.end(), [&](const fs::path& a, const fs::path& b) { return depth(a) > depth(b); });
  for (const fs::path& d : dirs)
    if (auto e = sync_directory(d)) return e;
  return std::nullopt;
}

/// `manifest` with the format, the step and the sorted file list set.
nlohmann::json completed_manifest(nlohmann::json manifest, std::int64_t step, std::vector<listed_file> files) {
  std::sort(files.begin(), files.end());
  nlohmann::json listed = nlohmann::json::array();
  for (const auto& [rel, bytes] : files) listed.push_back({{"path", rel}, {"bytes", bytes}});
  manifest["format"] = format_name;
  manifest["format_version"] = format_version;
  manifest["step"] = step;
  manifest["files"] = std::move(listed);
  return manifest;
}

/// Renames `partial` to `target`: without replacing, or, when `target` exists, exchanging the
/// two (`replaced` set; the old `target` is then at `partial`).
std::optional<file_error> move_into_place(const fs::path& partial, const fs::path& target, bool& replaced) {
  replaced = false;
  int rc = ::renameat2(AT_FDCWD, partial.c_str(), AT_FDCWD, target.c_str(), RENAME_NOREPLACE);
  if (rc != 0 && errno == EEXIST) {
    replaced = true;
    rc = ::renameat2(AT_FDCWD, partial.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE);
  }
  if (rc != 0) {
    replaced = false;
    return os_file_error(file_errc::cannot_write, "cannot move " + partial.string() + " into place as", target.string(), errno);
  }
  return std::nullopt;
}

/// The text of `p`, or "" with `reason` set to the errno of the failure.
std::string read_text(const fs::path& p, int& reason) {
  reason = 0;
  const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    reason = errno;
    return "";
  }
  std::string text;
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n > 0) text.append(buffer, static_cast<std::size_t>(n));
    else if (n < 0 && errno == EINTR) continue;
    else {
      if (n < 0) reason = errno;
      break;
    }
  }
  ::close(fd);
  return reason ? "" : text;
}

/// Why `manifest` does not describe step `step` in this format, or "" when it does.
std::string wrong_header(const nlohmann::json& manifest, std::int64_t step) {
  if (!manifest.is_object()) return "manifest.json is not a JSON object";
  const auto format = manifest.find("format");
  const auto version = manifest.find("format_version");
  if (format == manifest.end() || *format != format_name || version == manifest.end() || !version->is_number_integer() ||
      *version != format_version)
    return "manifest.json is not a tandem-checkpoint manifest of version 1";
  const auto s = manifest.find("step");
  if (s == manifest.end() || !s->is_number_integer()) return "manifest.json names no step";
  if (s->get<std::int64_t>() != step) return "manifest.json names step " + s->dump() + ", not " + std::to_string(step);
  return "";
}

/// Whether `rel` names a path inside the checkpoint directory (relative, no "..").
bool inside(const fs::path& rel) {
  if (rel.empty() || !rel.is_relative()) return false;
  return std::none_of(rel.begin(), rel.end(), [](const fs::path& part) { return part == ".."; });
}

/// Why the files `manifest` lists are not all in `dir` at their sizes, or "" when they are.
std::string wrong_files(const fs::path& dir, const nlohmann::json& manifest) {
  const auto files = manifest.find("files");
  if (files == manifest.end() || !files->is_array()) return "manifest.json lists no files";
  for (const auto& f : *files) {
    const bool well_formed = f.is_object() && f.contains("path") && f["path"].is_string() && f.contains("bytes") &&
                             f["bytes"].is_number_unsigned();
    if (!well_formed)
      return "manifest.json has a malformed file entry: " + f.dump();
    const std::string rel = f["path"].get<std::string>();
    const auto bytes = f["bytes"].get<std::uint64_t>();
    if (!inside(rel)) return "manifest.json lists " + rel + ", outside the checkpoint";
    std::error_code ec;
    const fs::file_status st = fs::status(dir / rel, ec);
    if (!fs::is_regular_file(st)) return rel + " is missing";
    const std::uint64_t size = fs::file_size(dir / rel, ec);
    if (ec) return rel + " cannot be read: " + ec.message();
    if (size != bytes) return rel + " holds " + std::to_string(size) + " bytes, the manifest says " + std::to_string(bytes);
  }
  return "";
}

/// Why directory `dir` is not the complete checkpoint of `step`, or "" when it is (then
/// `manifest` holds its manifest).
std::string incomplete(const fs::path& dir, std::int64_t step, nlohmann::json& manifest) {
  int reason = 0;
  const std::string text = read_text(dir / manifest_name, reason);
  if (reason == ENOENT) return "no manifest.json (an unfinished save)";
  if (reason != 0) return "cannot read manifest.json: " + os_reason(reason);
  manifest = nlohmann::json::parse(text, nullptr, false);
  if (manifest.is_discarded()) return "manifest.json is not valid JSON";
  if (std::string why = wrong_header(manifest, step); !why.empty()) return why;
  return wrong_files(dir, manifest);
}

}  // namespace

std::string checkpoint_name(std::int64_t step) { return "step_" + std::to_string(step); }

file_result<fs::path> begin_checkpoint(const fs::path& checkpoint_dir, std::int64_t step) {
  const fs::path partial = checkpoint_dir / (checkpoint_name(step) + partial_suffix);
  if (step < 0)
    return file_error{file_errc::cannot_create_directory, "cannot create " + partial.string() + ": a step is not negative"};
  std::error_code ec;
  fs::create_directories(checkpoint_dir, ec);
  if (ec) return os_file_error(file_errc::cannot_create_directory, "cannot create", checkpoint_dir.string(), ec.value());
  fs::remove_all(partial, ec);
  if (ec) return os_file_error(file_errc::cannot_create_directory, "cannot remove the unfinished", partial.string(), ec.value());
  if (::mkdir(partial.c_str(), 0755) != 0)
    return os_file_error(file_errc::cannot_create_directory, "cannot create", partial.string(), errno);
  return partial;
}

file_result<fs::path> commit_checkpoint(const fs::path& partial_arg, std::int64_t step, nlohmann::json manifest) {
  const fs::path partial = without_trailing_separator(partial_arg);
  const fs::path manifest_path = partial / manifest_name;
  if (step < 0 || partial.filename() != checkpoint_name(step) + partial_suffix)
    return file_error{file_errc::cannot_write, "cannot commit " + partial.string() + " as step " + std::to_string(step) +
                                                   ": it is not named " + checkpoint_name(step) + partial_suffix};
  if (!manifest.is_object())
    return file_error{file_errc::cannot_write, "cannot write " + manifest_path.string() + ": the manifest is not a JSON object"};
  std::vector<fs::path> dirs;
  std::vector<listed_file> files;
  if (auto e = sync_files(partial, dirs, files)) return *e;
  if (auto e = sync_directories(std::move(dirs))) return *e;
  manifest = completed_manifest(std::move(manifest), step, std::move(files));
  if (auto e = write_whole_file(manifest_path, manifest.dump(2) + "\n")) return *e;
  if (auto e = sync_directory(partial)) return *e;
  const fs::path checkpoint_dir = partial.parent_path().empty() ? fs::path(".") : partial.parent_path();
  const fs::path target = partial.parent_path() / checkpoint_name(step);
  bool replaced = false;
  if (auto e = move_into_place(partial, target, replaced)) return *e;
  if (auto e = sync_directory(checkpoint_dir)) return *e;
  if (replaced) {
    std::error_code ignored;  // the old checkpoint, now under the partial name: never listed; begin removes what is left
    fs::remove_all(partial, ignored);
  }
  return target;
}

checkpoint_listing list_checkpoints(const fs::path& checkpoint_dir) {
  checkpoint_listing out;
  std::error_code ec;
  fs::directory_iterator it(checkpoint_dir, ec);
  if (ec) {
    if (ec != std::errc::no_such_file_or_directory) out.skipped.push_back(checkpoint_dir.string() + ": cannot list: " + ec.message());
    return out;
  }
  std::vector<std::pair<std::pair<std::int64_t, std::string>, std::string>> skipped;  // ((step, name), sentence)
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (const auto step = step_of(name, partial_suffix)) {
      skipped.push_back({{*step, name}, it->path().string() + ": an unfinished save"});
      continue;
    }
    const auto step = step_of(name, "");
    if (!step) continue;  // not a checkpoint's name
    checkpoint_entry entry{*step, it->path(), {}};
    std::error_code type_ec;
    const std::string why = it->is_directory(type_ec) ? incomplete(it->path(), *step, entry.manifest) : "not a directory";
    if (why.empty()) out.complete.push_back(std::move(entry));
    else skipped.push_back({{*step, name}, it->path().string() + ": " + why});
  }
  if (ec) out.skipped.push_back(checkpoint_dir.string() + ": cannot list: " + ec.message());
  std::sort(out.complete.begin(), out.complete.end(), [](const auto& a, const auto& b) { return a.step < b.step; });
  std::sort(skipped.begin(), skipped.end());
  for (auto& s : skipped) out.skipped.push_back(std::move(s.second));
  return out;
}

std::optional<file_error> remove_checkpoint(const fs::path& checkpoint_dir, std::int64_t step) {
  const fs::path dir = checkpoint_dir / checkpoint_name(step);
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(dir, ec);
  if (ec && ec != std::errc::no_such_file_or_directory)
    return os_file_error(file_errc::cannot_write, "cannot remove", dir.string(), ec.value());
  if (!fs::exists(st)) return std::nullopt;
  if (fs::is_directory(st)) {
    const fs::path manifest = dir / manifest_name;
    if (::unlink(manifest.c_str()) != 0 && errno != ENOENT)
      return os_file_error(file_errc::cannot_write, "cannot remove", manifest.string(), errno);
    if (auto e = sync_directory(dir)) return e;
  }
  fs::remove_all(dir, ec);
  if (ec) return os_file_error(file_errc::cannot_write, "cannot remove", dir.string(), ec.value());
  return sync_directory(checkpoint_dir.empty() ? fs::path(".") : checkpoint_dir);
}

}  // namespace tandem::records
