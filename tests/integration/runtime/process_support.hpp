// Helpers of the runtime process tests: a child process in its own process group with its output
// in files, killed with its whole group (and every orphan reaped) when the test ends, pass or fail;
// "eventually" waits under generous deadlines; the controller harness's lines parsed.
//
// The test process makes itself a child subreaper, so members orphaned by a killed controller
// become its children: it can wait for them, read how they ended, and leaves no zombie behind.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <ostream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <zmq.hpp>

#include "actors/runtime/run_keys.hpp"
#include "support/temp_dir.h"

extern char** environ;

namespace runtime_test {

using clock_type = std::chrono::steady_clock;
/// The deadline of every "eventually" in these tests: long, so a loaded CI machine never trips it.
constexpr std::chrono::milliseconds generous{30000};

inline const std::string harness_binary = TANDEM_CONTROLLER_HARNESS;
inline const std::string tandem_binary = TANDEM_EXECUTABLE;
inline const std::string dedicated_recipe = std::string(TANDEM_SOURCE_DIR) + "/configs/recipes/tiny-fake-cpu-dedicated.yaml";

/// Orphaned descendants (members of a killed controller) become this process's children.
inline void become_subreaper() { ::prctl(PR_SET_CHILD_SUBREAPER, 1); }

/// Calls `condition` every 20 ms until it holds (true) or `limit` passes (false).
template <class F>
bool eventually(F&& condition, std::chrono::milliseconds limit = generous) {
  const auto deadline = clock_type::now() + limit;
  for (;;) {
    if (condition()) return true;
    if (clock_type::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// Wait statuses of processes gone() reaped, by pid.
inline std::map<pid_t, int>& reaped_statuses() {
  static std::map<pid_t, int> statuses;
  return statuses;
}

/// True when `pid` no longer runs: reaped now (a child or an adopted orphan; its status lands in
/// reaped_statuses()), absent, or a zombie its parent has not reaped.
inline bool gone(pid_t pid) {
  if (reaped_statuses().count(pid)) return true;
  const auto reap = [pid] {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) != pid) return false;
    reaped_statuses()[pid] = status;
    return true;
  };
  if (reap()) return true;
  const std::string stat = read_text("/proc/" + std::to_string(pid) + "/stat");
  if (stat.empty()) return true;
  const auto paren = stat.rfind(')');
  const bool dead = paren != std::string::npos && paren + 2 < stat.size() && (stat[paren + 2] == 'Z' || stat[paren + 2] == 'X');
  if (dead) reap();  // it may have died between the first wait and the read: reap it if it is ours
  return dead;
}

/// True once this process reaped `pid` (a child or an adopted orphan): its wait status is in
/// reaped_statuses(). A dead multithreaded process can show as a zombie a moment before it can be
/// waited for (its other threads are still exiting); this waits for the status itself.
inline bool reaped_here(pid_t pid) {
  gone(pid);
  return reaped_statuses().count(pid) > 0;
}

/// Limits a child_process starts under (inherited by the processes it starts).
struct child_limits {
  /// RLIMIT_FSIZE in bytes, with SIGXFSZ ignored: a write past it fails with EFBIG, as on a full
  /// disk (its stdout and stderr files are limited too).
  std::optional<rlim_t> file_size;
};

/// A process started in its own process group, stdout and stderr in files of a temporary folder.
/// The destructor kills the group (SIGCONT first, so stopped members die too), reaps the process
/// and any orphan that came to this process.
class child_process {
 public:
  child_process(const std::vector<std::string>& argv, const std::vector<std::pair<std::string, std::string>>& env = {},
                const std::vector<std::string>& unset = {}, const child_limits& limits = {}) {
    become_subreaper();
    out_path_ = dir_.path() / "stdout";
    err_path_ = dir_.path() / "stderr";
    // Everything is built before fork: the test may run ZeroMQ threads, so the child only makes
    // async-signal-safe calls.
    std::vector<std::string> args = argv, environment;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string entry = *e, name = entry.substr(0, entry.find('='));
      bool drop = false;
      for (const auto& u : unset) drop = drop || u == name;
      for (const auto& [n, v] : env) drop = drop || n == name;
      if (!drop) environment.push_back(entry);
    }
    for (const auto& [n, v] : env) environment.push_back(n + "=" + v);
    std::vector<char*> c_args, c_env;
    for (auto& a : args) c_args.push_back(a.data());
    for (auto& e : environment) c_env.push_back(e.data());
    c_args.push_back(nullptr);
    c_env.push_back(nullptr);
    const std::string out = out_path_.string(), err = err_path_.string();
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    const rlimit file_size{limits.file_size.value_or(RLIM_INFINITY), limits.file_size.value_or(RLIM_INFINITY)};
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setpgid(0, 0);
      if (limits.file_size && (::sigaction(SIGXFSZ, &ignore, nullptr) != 0 || ::setrlimit(RLIMIT_FSIZE, &file_size) != 0))
        ::_exit(126);
      const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
      const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
      ::dup2(o, 1);
      ::dup2(e, 2);
      ::execve(c_args[0], c_args.data(), c_env.data());
      ::_exit(127);
    }
    if (pid_ > 0) ::setpgid(pid_, pid_);  // also here: no race with the first kill of the group
  }
  ~child_process() {
    if (pid_ <= 0) return;
    ::kill(-pid_, SIGCONT);
    ::kill(-pid_, SIGKILL);
    if (!status_) {
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
    // Orphans of the group (members) were reparented here; reap them until none is left.
    eventually(
        [] {
          int status = 0;
          const pid_t r = ::waitpid(-1, &status, WNOHANG);
          if (r > 0) reaped_statuses()[r] = status;
          return r < 0;  // ECHILD: no child left
        },
        std::chrono::milliseconds(10000));
  }
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  pid_t pid() const { return pid_; }
  std::string out() const { return read_text(out_path_); }
  std::string err() const { return read_text(err_path_); }
  /// stdout and stderr for a failure message, read when the message is printed (Boost.Test may
  /// evaluate a message's arguments before the checked condition).
  struct lazy_output {
    const child_process* p;
    friend std::ostream& operator<<(std::ostream& os, const lazy_output& o) {
      return os << "--- stdout:\n" << o.p->out() << "--- stderr:\n" << o.p->err() << "---";
    }
  };
  lazy_output output() const { return {this}; }

  /// The wait status once the process ended, waiting up to `limit`; nullopt if it still runs.
  std::optional<int> wait_exit(std::chrono::milliseconds limit = generous) {
    eventually(
        [&] {
          int status = 0;
          if (!status_ && ::waitpid(pid_, &status, WNOHANG) == pid_) status_ = status;
          return status_.has_value();
        },
        limit);
    return status_;
  }
  /// The exit code, or -1 for a signal or a process still running after `limit`.
  int exit_code(std::chrono::milliseconds limit = generous) {
    const auto s = wait_exit(limit);
    return s && WIFEXITED(*s) ? WEXITSTATUS(*s) : -1;
  }

  /// The first submatch of `re` in stdout once it appears (nullopt at the deadline or when the
  /// process ended without it).
  std::optional<std::string> await_out(const std::regex& re, std::chrono::milliseconds limit = generous) {
    std::optional<std::string> found;
    eventually(
        [&] {
          std::smatch m;
          const std::string text = out();
          if (std::regex_search(text, m, re)) found = m.size() > 1 ? m[1].str() : m[0].str();
          return found.has_value() || wait_exit(std::chrono::milliseconds(0)).has_value();
        },
        limit);
    if (!found) {  // it may have been written just before the process ended
      std::smatch m;
      const std::string text = out();
      if (std::regex_search(text, m, re)) found = m.size() > 1 ? m[1].str() : m[0].str();
    }
    return found;
  }

 private:
  tandem::test::temp_dir dir_;
  std::filesystem::path out_path_, err_path_;
  pid_t pid_ = -1;
  std::optional<int> status_;
};

/// A run's keys in a 0600 file of a temporary folder, as `tandem keys` writes it: hand its path to
/// a controller and to the members started by hand as TANDEM_KEYS.
struct keys_file {
  tandem::test::temp_dir dir;
  tandem::run_keys keys;
  std::string path;
  explicit keys_file(std::int64_t world) : keys(tandem::make_run_keys(world).value()), path((dir.path() / "run.keys").string()) {
    if (!tandem::write_run_keys_file(path, keys)) throw std::runtime_error("cannot write " + path);
  }
  std::pair<std::string, std::string> variable() const { return {"TANDEM_KEYS", path}; }
};

/// A DEALER connected to `endpoint` as `routing_id`; with `client` it is a CURVE client of the
/// server key `server_public` (a run's member, or a stranger with a key of its own).
inline zmq::socket_t dealer_to(zmq::context_t& context, const std::string& endpoint, const std::string& routing_id,
                               const std::optional<tandem::gpu::curve_keypair>& client = std::nullopt,
                               const std::string& server_public = "") {
  zmq::socket_t s(context, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  if (!routing_id.empty()) s.set(zmq::sockopt::routing_id, routing_id);
  if (client) {
    s.set(zmq::sockopt::curve_serverkey, server_public);
    s.set(zmq::sockopt::curve_publickey, client->public_key);
    s.set(zmq::sockopt::curve_secretkey, client->secret_key);
  }
  s.connect(endpoint);
  return s;
}

/// The controller harness for the dedicated tiny recipe (4 members: 2 policy, 2 rollout) on an
/// ephemeral loopback port, its members running the real `tandem join`, plus `extra` options.
inline std::vector<std::string> harness_args(const std::vector<std::string>& extra) {
  std::vector<std::string> a = {harness_binary, dedicated_recipe, "--bind", "tcp://127.0.0.1:*", "--member-exe", tandem_binary};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

/// Member pids by rank, from the harness's "spawned member R (pid P)" lines.
inline std::map<int, pid_t> member_pids(const std::string& out) {
  std::map<int, pid_t> pids;
  static const std::regex line(R"(spawned member ([0-9]+) \(pid ([0-9]+)\))");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), line); it != std::sregex_iterator(); ++it)
    pids[std::stoi((*it)[1].str())] = static_cast<pid_t>(std::stol((*it)[2].str()));
  return pids;
}

/// Starts the harness and waits until its four members joined; their pids by rank (empty when
/// they did not join: the caller's check fails and prints the output).
inline std::map<int, pid_t> start_and_join(child_process& h) {
  if (!h.await_out(std::regex("all 4 members joined"))) return {};
  return member_pids(h.out());
}

}  // namespace runtime_test
