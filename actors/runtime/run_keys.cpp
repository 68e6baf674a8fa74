// A run's CurveZMQ keys: making, rendering, parsing, files and inherited descriptors (run_keys.hpp).
#include "actors/runtime/run_keys.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <sstream>

#include "gpu/core/printable.h"

namespace tandem {

namespace {

using gpu::status;
using gpu::status_code;

status bad(const std::string& where, const std::string& what) { return {status_code::invalid_argument, where + ": " + what}; }

std::vector<std::string_view> words_of(std::string_view line) {
  std::vector<std::string_view> words;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    const std::size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i > start) words.push_back(line.substr(start, i - start));
  }
  return words;
}

/// The key pair of a record's key words (public, optional secret), checked.
gpu::result<gpu::curve_keypair> keypair_of(const std::vector<std::string_view>& w, std::size_t first, const std::string& where) {
  if (w.size() < first + 1 || w.size() > first + 2) return bad(where, "expected a public key and optionally its secret key");
  gpu::curve_keypair k{std::string(w[first]), w.size() == first + 2 ? std::string(w[first + 1]) : std::string()};
  if (!gpu::is_curve_key(k.public_key)) return bad(where, "the public key is not 40 Z85 characters");
  if (!k.secret_key.empty()) {
    if (!gpu::is_curve_key(k.secret_key)) return bad(where, "the secret key is not 40 Z85 characters");
    auto pub = gpu::curve_public_key(k.secret_key);
    if (!pub) return bad(where, pub.error().message());
    if (*pub != k.public_key) return bad(where, "the secret key does not belong to the public key beside it");
  }
  return k;
}

std::optional<std::int64_t> integer_of(std::string_view text) {
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

}  // namespace

gpu::result<run_keys> make_run_keys(std::int64_t world) {
  if (world < 1) return status{status_code::invalid_argument, "a run has at least one member, not " + std::to_string(world)};
  run_keys k;
  k.world = world;
  auto c = gpu::make_curve_keypair();
  if (!c) return c.error();
  k.controller = *c;
  for (std::int64_t r = 0; r < world; ++r) {
    auto w = gpu::make_curve_keypair();
    if (!w) return w.error();
    k.members.push_back(*w);
  }
  return k;
}

run_keys credentials_for(const run_keys& keys, std::int64_t rank) {
  run_keys c = keys;
  c.controller.secret_key.clear();
  for (std::size_t r = 0; r < c.members.size(); ++r)
    if (static_cast<std::int64_t>(r) != rank) c.members[r].secret_key.clear();
  return c;
}

std::string render_run_keys(const run_keys& keys) {
  std::string out =
      "# tandem run keys: the CurveZMQ key pairs (Z85) of one run's controller and members.\n"
      "# Whoever can read this file can join the run: keep it private (mode 0600).\n"
      "tandem-keys 1\n"
      "world " + std::to_string(keys.world) + "\n";
  const auto pair = [](const gpu::curve_keypair& k) { return k.public_key + (k.secret_key.empty() ? "" : " " + k.secret_key); };
  out += "controller " + pair(keys.controller) + "\n";
  for (std::size_t r = 0; r < keys.members.size(); ++r) out += "member " + std::to_string(r) + " " + pair(keys.members[r]) + "\n";
  return out;
}

gpu::result<run_keys> parse_run_keys(std::string_view text, const std::string& source) {
  run_keys k;
  bool header = false, controller = false;
  std::vector<bool> seen;
  std::size_t line_no = 0;
  for (std::size_t at = 0; at <= text.size();) {
    const std::size_t end = std::min(text.find('\n', at), text.size());
    std::string_view line = text.substr(at, end - at);
    at = end + 1;
    ++line_no;
    const std::string where = source + ":" + std::to_string(line_no);
    const auto w = words_of(line);
    if (w.empty() || w[0].starts_with("#")) {  // a comment is a whole line: '#' is also a Z85 character
      if (end == text.size()) break;
      continue;
    }
    if (!header) {
      if (w.size() != 2 || w[0] != "tandem-keys") return bad(where, "not a tandem keys file (the first record must be 'tandem-keys 1')");
      if (w[1] != "1") return bad(where, "keys file version '" + gpu::printable(w[1]) + "' is not 1");
      header = true;
    } else if (w[0] == "world") {
      const auto n = w.size() == 2 ? integer_of(w[1]) : std::nullopt;
      if (!n || *n < 1 || *n > (1 << 20)) return bad(where, "'world' takes one positive integer");
      if (k.world != 0) return bad(where, "'world' appears twice");
      k.world = *n;
      k.members.assign(static_cast<std::size_t>(*n), {});
      seen.assign(static_cast<std::size_t>(*n), false);
    } else if (w[0] == "controller") {
      if (controller) return bad(where, "'controller' appears twice");
      auto p = keypair_of(w, 1, where);
      if (!p) return p.error();
      k.controller = *p;
      controller = true;
    } else if (w[0] == "member") {
      if (k.world == 0) return bad(where, "'member' before 'world'");
      const auto r = w.size() >= 2 ? integer_of(w[1]) : std::nullopt;
      if (!r || *r < 0 || *r >= k.world)
        return bad(where, "a member rank in 0.." + std::to_string(k.world - 1) + " must follow 'member'");
      if (seen[static_cast<std::size_t>(*r)]) return bad(where, "member " + std::to_string(*r) + " appears twice");
      auto p = keypair_of(w, 2, where);
      if (!p) return p.error();
      k.members[static_cast<std::size_t>(*r)] = *p;
      seen[static_cast<std::size_t>(*r)] = true;
    } else {
      return bad(where, "unknown record '" + gpu::printable(w[0]) + "' (expected world, controller or member)");
    }
    if (end == text.size()) break;
  }
  if (!header) return bad(source, "empty: not a tandem keys file");
  if (k.world == 0) return bad(source, "no 'world' record");
  if (!controller) return bad(source, "no 'controller' record");
  for (std::size_t r = 0; r < seen.size(); ++r)
    if (!seen[r]) return bad(source, "no key of member " + std::to_string(r));
  return k;
}

gpu::result<run_keys> read_run_keys_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return status{status_code::not_found, path + ": cannot open the run's keys: " + std::strerror(errno)};
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return bad(path, "the run's keys must be a regular file");
  }
  if (st.st_uid != ::geteuid()) {
    ::close(fd);
    return bad(path, "the run's keys belong to user id " + std::to_string(st.st_uid) + ", not to this user (" +
                         std::to_string(::geteuid()) + ")");
  }
  if ((st.st_mode & 077) != 0) {
    ::close(fd);
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return bad(path, std::string("the run's keys are readable or writable by others (mode ") + mode +
                         "): anyone who reads them can join the run; chmod 600 " + path);
  }
  return read_run_keys_fd(fd, path);
}

gpu::result<run_keys> read_run_keys_fd(int fd, const std::string& source) {
  std::string text;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      return status{status_code::io_error, source + ": cannot read the run's keys: " + std::strerror(e)};
    }
    if (n == 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
    if (text.size() > (std::size_t{64} << 20)) {
      ::close(fd);
      return bad(source, "more than 64 MiB: not a keys file");
    }
  }
  ::close(fd);
  return parse_run_keys(text, source);
}

gpu::status write_run_keys_file(const std::string& path, const run_keys& keys) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::symlink_status(path, ec).type() != fs::file_type::not_found)
    return bad(path, "exists already: run keys are never overwritten (remove it first, or use another name)");
  const fs::path target(path);
  const fs::path temp = target.parent_path() / ("." + target.filename().string() + ".tmp-" + std::to_string(::getpid()));
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return status{status_code::io_error, temp.string() + ": cannot create: " + std::strerror(errno)};
  const std::string text = render_run_keys(keys);
  std::size_t done = 0;
  int error = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      error = errno;
      break;
    }
    done += static_cast<std::size_t>(n);
  }
  if (error == 0 && ::fsync(fd) != 0) error = errno;
  ::close(fd);
  if (error == 0 && ::link(temp.c_str(), target.c_str()) != 0) error = errno;  // never replaces an existing file
  ::unlink(temp.c_str());
  if (error == EEXIST) return bad(path, "exists already: run keys are never overwritten");
  if (error != 0) return status{status_code::io_error, path + ": cannot write the run's keys: " + std::strerror(error)};
  return status::ok();
}

gpu::status check_run_keys_for(const run_keys& keys, std::int64_t world, std::int64_t rank, const std::string& source) {
  if (keys.world != world)
    return bad(source, "the keys are for a run of " + std::to_string(keys.world) + " members; this run has " + std::to_string(world));
  if (rank < 0 && keys.controller.secret_key.empty()) return bad(source, "the controller's secret key is missing");
  if (rank >= 0 && (rank >= keys.world || keys.members[static_cast<std::size_t>(rank)].secret_key.empty()))
    return bad(source, "member " + std::to_string(rank) + "'s secret key is missing");
  return status::ok();
}

gpu::result<std::optional<run_keys>> controller_keys(bool secure, std::int64_t world, std::int64_t spawned_here) {
  if (!secure) return std::optional<run_keys>();
  if (const char* path = std::getenv("TANDEM_KEYS"); path != nullptr && *path != '\0') {
    auto k = read_run_keys_file(path);
    if (!k) return k.error();
    if (status s = check_run_keys_for(*k, world, -1, std::string("TANDEM_KEYS=") + path); !s) return s;
    return std::optional<run_keys>(std::move(k.value()));
  }
  if (spawned_here < world)
    return bad("cluster.secure", std::to_string(world - spawned_here) + " of the run's " + std::to_string(world) +
                                     " members are started outside this process (by hand or by a launcher) and need the run's "
                                     "keys: make them with `tandem keys FILE --world " + std::to_string(world) +
                                     "` and set TANDEM_KEYS=FILE for the controller and those members");
  auto k = make_run_keys(world);
  if (!k) return k.error();
  return std::optional<run_keys>(std::move(k.value()));
}

gpu::result<std::optional<run_keys>> member_keys_from_environment() {
  if (const char* fd_text = std::getenv("TANDEM_KEYS_FD"); fd_text != nullptr && *fd_text != '\0') {
    const auto fd = integer_of(fd_text);
    const std::string source = std::string("TANDEM_KEYS_FD=") + gpu::printable(fd_text);
    if (!fd || *fd < 0 || *fd > 1 << 20) return bad(source, "not a file descriptor");
    auto k = read_run_keys_fd(static_cast<int>(*fd), source);
    ::unsetenv("TANDEM_KEYS_FD");  // the descriptor is closed now: nothing of this process reads it again
    if (!k) return k.error();
    return std::optional<run_keys>(std::move(k.value()));
  }
  if (const char* path = std::getenv("TANDEM_KEYS"); path != nullptr && *path != '\0') {
    auto k = read_run_keys_file(path);
    if (!k) return k.error();
    return std::optional<run_keys>(std::move(k.value()));
  }
  return std::optional<run_keys>();
}

}  // namespace tandem
