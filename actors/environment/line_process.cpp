// A line-answering child process (line_process.hpp).
#include "actors/environment/line_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

extern char** environ;

namespace tandem {
namespace {

std::string os_error(int e) { return std::strerror(e); }

std::string exit_text(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "was killed by signal " + std::to_string(WTERMSIG(status));
  return "ended";
}

}  // namespace

line_process::line_process(std::string command) : command_(std::move(command)) {}

line_process::~line_process() {
  if (pid_ < 0) return;
  // Closing its stdin asks it to finish; one that does not within a second is killed.
  ::close(to_child_);
  to_child_ = -1;
  for (int i = 0; i < 100; ++i) {
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_ || (r < 0 && errno != EINTR)) {
      forget();
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  (void)stop();
}

bool line_process::start(std::string& problem) {
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) != 0) {
    problem = "cannot make a pipe: " + os_error(errno);
    return false;
  }
  if (::pipe2(out, O_CLOEXEC) != 0) {
    problem = "cannot make a pipe: " + os_error(errno);
    ::close(in[0]);
    ::close(in[1]);
    return false;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGCHLD, SIGHUP}) sigaddset(&defaults, sig);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setpgroup(&attr, 0);  // its own process group: a kill reaches what it started too
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  std::string sh = "/bin/sh", dash_c = "-c";
  char* argv[] = {sh.data(), dash_c.data(), command_.data(), nullptr};
  pid_t pid = -1;
  const int spawned = ::posix_spawn(&pid, "/bin/sh", &actions, &attr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(in[0]);
  ::close(out[1]);
  if (spawned != 0) {
    ::close(in[1]);
    ::close(out[0]);
    problem = "cannot start /bin/sh -c '" + command_ + "': " + os_error(spawned);
    return false;
  }
  pid_ = pid;
  to_child_ = in[1];
  from_child_ = out[0];
  buffered_.clear();
  return true;
}

std::string line_process::stop() {
  if (pid_ < 0) return "was not running";
  ::kill(-pid_, SIGKILL);  // the whole group
  int status = 0;
  std::string how = "ended";
  while (true) {
    const pid_t r = ::waitpid(pid_, &status, 0);
    if (r == pid_) {
      how = exit_text(status);
      break;
    }
    if (r < 0 && errno != EINTR) break;
  }
  forget();
  return how;
}

void line_process::forget() {
  if (to_child_ >= 0) ::close(to_child_);
  if (from_child_ >= 0) ::close(from_child_);
  to_child_ = from_child_ = -1;
  pid_ = -1;
}

bool line_process::write_all(const std::string& bytes, std::string& problem) {
  // SIGPIPE is blocked in this thread while writing, so a process that is gone gives EPIPE here
  // instead of killing ours; the pending signal is taken back before the mask is restored.
  sigset_t pipe_only, old;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
  std::size_t done = 0;
  int error = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(to_child_, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      error = errno;
      break;
    }
    done += static_cast<std::size_t>(n);
  }
  if (error == EPIPE) {
    const timespec zero{0, 0};
    (void)sigtimedwait(&pipe_only, nullptr, &zero);
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (error == 0) return true;
  problem = error == EPIPE ? "it closed its input" : "writing to it failed: " + os_error(error);
  return false;
}

bool line_process::exchange(const std::string& line, std::chrono::milliseconds timeout, std::string& answer,
                            std::string& problem) {
  if (pid_ < 0 && !start(problem)) return false;
  if (!write_all(line + "\n", problem)) {
    problem += " (the process " + stop() + ")";
    return false;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (const auto nl = buffered_.find('\n'); nl != std::string::npos) {
      answer = buffered_.substr(0, nl);
      buffered_.erase(0, nl + 1);
      return true;
    }
    if (buffered_.size() > max_line_bytes) {
      problem = "its answer line is longer than " + std::to_string(max_line_bytes) + " bytes (the process " + stop() + ")";
      return false;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      problem = "no answer within " + std::to_string(timeout.count()) + " ms (the process " + stop() + ")";
      return false;
    }
    pollfd p{from_child_, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) {
      problem = "waiting for its answer failed: " + os_error(errno) + " (the process " + stop() + ")";
      return false;
    }
    if (ready == 0) continue;
    char chunk[65536];
    const ssize_t n = ::read(from_child_, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      problem = n == 0 ? "its output ended before an answer" : "reading its answer failed: " + os_error(errno);
      // It closed its output: usually it exited; give it a moment to, else kill it.
      for (int i = 0; i < 100; ++i) {
        int status = 0;
        const pid_t r = ::waitpid(pid_, &status, WNOHANG);
        if (r == pid_) {
          problem += " (the process " + exit_text(status) + ")";
          forget();
          return false;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      problem += " (the process " + stop() + ")";
      return false;
    }
    buffered_.append(chunk, static_cast<std::size_t>(n));
  }
}

}  // namespace tandem
