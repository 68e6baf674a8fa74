// The member processes a controller starts on its own machine (`tandem run` on one node): fork and
// exec of `tandem join ...`, a reaper thread that reports each child's exit as it happens, and
// the final kill and reap so no child outlives the run.
//
// Exits are seen through pidfds (pidfd_open) polled by the reaper thread, with a periodic
// waitpid(WNOHANG) sweep as the fallback: no SIGCHLD handler, so the process's signal
// dispositions stay untouched. spawn() must be called from a thread that lives as long as the
// children (the controller's main thread): a member's parent-death signal (PR_SET_PDEATHSIG) fires
// when the thread that forked it ends, not only the process.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <caf/expected.hpp>

namespace tandem {

/// A child process that ended.
struct child_exit {
  std::int64_t rank = 0;
  pid_t pid = 0;
  int wait_status = 0;  ///< as waitpid reports it
  std::string how;      ///< "exited with status 3", "exited with signal 9 (SIGKILL)"
};

/// "exited with status 0", "exited with signal 9 (SIGKILL)", "exited with signal 6 (SIGABRT), core dumped".
std::string describe_wait_status(int wait_status);

/// Local member processes: spawn, watch, stop.
class local_members {
 public:
  local_members() = default;
  /// stop_all(0): kills and reaps whatever is still running.
  ~local_members();
  local_members(const local_members&) = delete;
  local_members& operator=(const local_members&) = delete;

  /// Forks and execs `executable args...` with the environment of this process plus `env`
  /// (name, value pairs that replace same-named variables). `secret`, when set, is handed to the
  /// child privately: on descriptor 3 (an anonymous memory file only the child inherits), with
  /// TANDEM_KEYS_FD=3 in its environment; it never appears in the arguments or the environment.
  /// Returns the child's pid once exec succeeded, or why it failed (fork, or exec: "cannot execute
  /// '/x': No such file or directory"). Call before watch().
  caf::expected<pid_t> spawn(std::int64_t rank, const std::string& executable, const std::vector<std::string>& args,
                             const std::vector<std::pair<std::string, std::string>>& env,
                             const std::optional<std::string>& secret = std::nullopt);

  /// Starts the reaper thread; `on_exit` is called on it once per child that ends.
  void watch(std::function<void(const child_exit&)> on_exit);

  /// SIGKILL to the child of `rank` (a hung member), if it still runs.
  void kill_rank(std::int64_t rank);

  /// Waits up to `grace` for every child to end, then SIGKILLs the rest (a stopped child too) and
  /// reaps them all; stops the reaper. Returns the children that had to be killed, as
  /// "rank 2 (pid 1234)". Idempotent.
  std::vector<std::string> stop_all(std::chrono::milliseconds grace);

  /// Pids of the children not reaped yet.
  std::vector<pid_t> running() const;

 private:
  struct child {
    std::int64_t rank = 0;
    pid_t pid = 0;
    int pidfd = -1;  // -1 where pidfd_open is unavailable (the sweep still reaps it)
    bool reaped = false;
  };
  void reap_loop();
  /// waitpid(WNOHANG) over the children; returns the exits found (reaped now).
  std::vector<child_exit> sweep();

  mutable std::mutex mutex_;  // guards children_, stopping_
  std::condition_variable changed_;
  std::vector<child> children_;
  std::function<void(const child_exit&)> on_exit_;
  bool stopping_ = false;
  int wake_fd_ = -1;
  std::thread reaper_;
};

}  // namespace tandem
