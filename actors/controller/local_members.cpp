// fork/exec of local member processes, their reaper thread, and the final kill-and-reap.
#include "actors/controller/local_members.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include <caf/error.hpp>
#include <caf/sec.hpp>

#include "actors/api/error_context.hpp"

extern char** environ;

namespace tandem {

namespace {

int open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));  // O_CLOEXEC is implied
#else
  (void)pid;
  return -1;
#endif
}

/// Reads exactly sizeof(int) bytes, or fewer at end of file; retries EINTR.
ssize_t read_int(int fd, int& value) {
  for (;;) {
    const ssize_t n = ::read(fd, &value, sizeof value);
    if (n < 0 && errno == EINTR) continue;
    return n;
  }
}

}  // namespace

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* abbrev = ::sigabbrev_np(sig);
    std::string out = "exited with signal " + std::to_string(sig) + (abbrev ? " (SIG" + std::string(abbrev) + ")" : "");
    if (WCOREDUMP(status)) out += ", core dumped";
    return out;
  }
  return "changed state (wait status " + std::to_string(status) + ")";
}

local_members::~local_members() {
  stop_all(std::chrono::milliseconds(0));
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

caf::expected<pid_t> local_members::spawn(std::int64_t rank, const std::string& executable, const std::vector<std::string>& args,
                                          const std::vector<std::pair<std::string, std::string>>& env,
                                          const std::optional<std::string>& secret) {
  constexpr int secret_fd = 3;
  int memfd = -1;  // the secret, in a file with no name; closed here once the child has it
  if (secret) {
    memfd = static_cast<int>(::memfd_create("tandem-keys", MFD_CLOEXEC));
    if (memfd < 0)
      return caf::make_error(caf::sec::runtime_error,
                             "cannot start member " + std::to_string(rank) + ": memfd_create: " + std::strerror(errno));
    std::size_t done = 0;
    while (done < secret->size()) {
      const ssize_t n = ::write(memfd, secret->data() + done, secret->size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        const int e = errno;
        ::close(memfd);
        return caf::make_error(caf::sec::runtime_error, "cannot start member " + std::to_string(rank) +
                                                            ": writing its keys failed: " + std::strerror(e));
      }
      done += static_cast<std::size_t>(n);
    }
    ::lseek(memfd, 0, SEEK_SET);
  }
  struct close_secret {
    int fd;
    ~close_secret() {
      if (fd >= 0) ::close(fd);
    }
  } closer{memfd};
  // Everything the child needs is built before fork: after it, only async-signal-safe calls.
  std::vector<std::string> argv_text = {executable};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::set<std::string> replaced;
  for (const auto& [name, value] : env) replaced.insert(name);
  std::vector<std::string> env_text;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry = *e;
    if (!replaced.count(entry.substr(0, entry.find('=')))) env_text.push_back(entry);
  }
  for (const auto& [name, value] : env) env_text.push_back(name + "=" + value);
  if (secret) env_text.push_back("TANDEM_KEYS_FD=" + std::to_string(secret_fd));
  std::vector<char*> argv, envp;
  for (auto& s : argv_text) argv.push_back(s.data());
  for (auto& s : env_text) envp.push_back(s.data());
  argv.push_back(nullptr);
  envp.push_back(nullptr);

  int exec_pipe[2];
  if (::pipe2(exec_pipe, O_CLOEXEC) != 0)
    return caf::make_error(caf::sec::runtime_error,
                           std::string("cannot start member ") + std::to_string(rank) + ": pipe2: " + std::strerror(errno));
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    ::close(exec_pipe[0]);
    ::close(exec_pipe[1]);
    return caf::make_error(caf::sec::runtime_error,
                           "cannot start member " + std::to_string(rank) + ": fork: " + std::strerror(e));
  }
  if (pid == 0) {
    ::close(exec_pipe[0]);
    sigset_t none;
    ::sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int sig : {SIGTERM, SIGINT, SIGPIPE, SIGCHLD, SIGHUP}) ::signal(sig, SIG_DFL);
    if (memfd >= 0) {
      if (memfd == secret_fd) ::fcntl(secret_fd, F_SETFD, 0);  // keep it across exec
      else if (::dup2(memfd, secret_fd) < 0) ::_exit(126);     // dup2 clears close-on-exec
    }
    ::execve(argv[0], argv.data(), envp.data());
    const int e = errno;
    [[maybe_unused]] const ssize_t n = ::write(exec_pipe[1], &e, sizeof e);
    ::_exit(127);
  }
  ::close(exec_pipe[1]);
  int exec_errno = 0;
  const ssize_t n = read_int(exec_pipe[0], exec_errno);
  ::close(exec_pipe[0]);
  if (n > 0) {  // exec failed: the child has exited with 127
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return tandem_error(tandem_errc::invalid_config, "cannot start member " + std::to_string(rank) + ": cannot execute '" +
                                                         executable + "': " + std::strerror(exec_errno));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  children_.push_back({rank, pid, open_pidfd(pid), false});
  return pid;
}

void local_members::watch(std::function<void(const child_exit&)> on_exit) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (reaper_.joinable() || stopping_) return;
  on_exit_ = std::move(on_exit);
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  reaper_ = std::thread([this] { reap_loop(); });
}

void local_members::kill_rank(std::int64_t rank) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& c : children_)
    if (c.rank == rank && !c.reaped) ::kill(c.pid, SIGKILL);
}

std::vector<child_exit> local_members::sweep() {
  std::vector<child_exit> exits;
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& c : children_) {
    if (c.reaped) continue;
    int status = 0;
    const pid_t r = ::waitpid(c.pid, &status, WNOHANG);
    if (r == 0 || (r < 0 && errno == EINTR)) continue;
    c.reaped = true;
    if (c.pidfd >= 0) ::close(c.pidfd);
    c.pidfd = -1;
    exits.push_back({c.rank, c.pid, status, r == c.pid ? describe_wait_status(status) : "is gone (reaped elsewhere)"});
  }
  return exits;
}

void local_members::reap_loop() {
  for (;;) {
    std::vector<pollfd> fds{{wake_fd_, POLLIN, 0}};
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_) return;
      for (const auto& c : children_)
        if (!c.reaped && c.pidfd >= 0) fds.push_back({c.pidfd, POLLIN, 0});
    }
    ::poll(fds.data(), fds.size(), 200);  // pidfds wake it at once; the timeout is the fallback sweep
    if (fds[0].revents & POLLIN) {
      std::uint64_t count = 0;
      [[maybe_unused]] const ssize_t n = ::read(wake_fd_, &count, sizeof count);
    }
    const std::vector<child_exit> exits = sweep();
    for (const auto& e : exits)
      if (on_exit_) on_exit_(e);
    if (!exits.empty()) changed_.notify_all();
  }
}

std::vector<std::string> local_members::stop_all(std::chrono::milliseconds grace) {
  watch({});  // no-op when already watching; otherwise a reaper without a listener
  std::vector<std::string> killed;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (stopping_) return killed;
    const auto all_reaped = [this] {
      return std::all_of(children_.begin(), children_.end(), [](const child& c) { return c.reaped; });
    };
    changed_.wait_for(lock, grace, all_reaped);
    for (const auto& c : children_) {
      if (c.reaped) continue;
      ::kill(c.pid, SIGKILL);  // also ends a stopped (SIGSTOP) child
      killed.push_back("rank " + std::to_string(c.rank) + " (pid " + std::to_string(c.pid) + ")");
    }
    changed_.wait_for(lock, std::chrono::seconds(10), all_reaped);
    stopping_ = true;
  }
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof one);
  reaper_.join();
  return killed;
}

std::vector<pid_t> local_members::running() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<pid_t> out;
  for (const auto& c : children_)
    if (!c.reaped) out.push_back(c.pid);
  return out;
}

}  // namespace tandem
