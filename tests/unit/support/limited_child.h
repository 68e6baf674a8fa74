// Runs a function in a forked child under a resource limit (RLIMIT_FSIZE with SIGXFSZ ignored, so
// a write past it fails with EFBIG; RLIMIT_NOFILE, so an open fails with EMFILE), which makes
// writes and opens fail for real, also for root, without limiting the test process. The function
// returns its report as text; it comes back over a pipe.
#pragma once

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <string>

namespace tandem::test {

struct limited_result {
  bool exited_cleanly = false;  ///< the child ran the function and exited 0
  std::string report;           ///< what the function returned
};

/// Runs `body` in a child whose soft limit of `resource` is `limit` (the hard limit kept, so
/// `body` may raise it again).
inline limited_result run_limited(int resource, rlim_t limit, const std::function<std::string()>& body) {
  int fds[2];
  if (::pipe(fds) != 0) return {};
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    if (resource == RLIMIT_FSIZE) ::signal(SIGXFSZ, SIG_IGN);
    rlimit l{};
    ::getrlimit(resource, &l);
    l.rlim_cur = limit;
    if (::setrlimit(resource, &l) != 0) ::_exit(3);
    const std::string report = body();
    std::size_t done = 0;
    while (done < report.size()) {
      const ssize_t n = ::write(fds[1], report.data() + done, report.size() - done);
      if (n <= 0) ::_exit(4);
      done += static_cast<std::size_t>(n);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  limited_result out;
  char buffer[4096];
  for (ssize_t n; (n = ::read(fds[0], buffer, sizeof buffer)) > 0;) out.report.append(buffer, static_cast<std::size_t>(n));
  ::close(fds[0]);
  int status = 0;
  if (pid > 0 && ::waitpid(pid, &status, 0) == pid) out.exited_cleanly = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  return out;
}

}  // namespace tandem::test
